"""Latency of the answer stage (selection, answerability gate, answer, grounding guard) against
an earlier checkout, measured in the same run.

    python scripts/bench_answer_stage.py                       # baseline: git ref c0efda7
    python scripts/bench_answer_stage.py --baseline-ref HEAD~3 --plot docs/img/answer_stage.png

Both sides answer the same questions (the natural-question set, then the shared sample's dataset
queries) over the same index, each in its own process: the baseline's code is taken with
``git archive`` into a temporary folder. Per question, the answer stage is the sum of the trace
stages after the relevance guard (``select_answer``, ``answerability_gate``, ``answer``,
``grounding_guard``); the query embedding and the search are the same on both sides and are
reported apart. Prints P50/P95 per side and their ratio; medians, because the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REF = "c0efda7"
"""The last commit before answer selection across passages (issue #9): top passage, best-covered
sentence, gate on top cosine / coverage / group agreement."""
ANSWER_STAGES = ("select_answer", "answerability_gate", "answer", "grounding_guard")

_MEASURE = r"""
import json, sys
from rag.pipeline import Pipeline
from rag.settings import RagSettings
pipeline = Pipeline.from_settings(RagSettings.from_env())
job = json.load(sys.stdin)
questions, STAGES = job["questions"], job["stages"]
out = []
for _ in range(2):  # the first pass warms caches; the second is reported
    out = []
    for q in questions:
        result = pipeline.ask(q)
        stages = {s.name: s.elapsed_ms for s in result.trace.stages}
        out.append([sum(stages.get(n, 0.0) for n in STAGES), stages.get("embed", 0.0),
                    stages.get("search", 0.0), result.is_answered])
print(json.dumps(out))
"""


def questions(limit: int) -> list[str]:
    """Natural questions first, then dataset queries with passages in the sample."""
    natural = [json.loads(line)["question"]
               for line in (ROOT / "eval" / "natural_questions.jsonl").open(encoding="utf-8")]
    data = ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "queries.jsonl"
    dataset = [q["text"] for q in map(json.loads, data.open(encoding="utf-8"))
               if q["has_passages_in_corpus"]]
    return (natural + dataset)[:limit]


def measure(code_dir: Path, texts: list[str]) -> np.ndarray:
    """Run the questions through the pipeline of ``code_dir`` in a fresh process.

    Returns float64 (len(texts), 4): answer-stage ms, embed ms, search ms, answered (0/1)."""
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    job = json.dumps({"questions": texts, "stages": ANSWER_STAGES})
    proc = subprocess.run([sys.executable, "-c", _MEASURE], input=job,
                          capture_output=True, text=True, env=env, cwd=code_dir, check=True)
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
    args = parser.parse_args(argv)
    texts = questions(args.questions)
    with tempfile.TemporaryDirectory() as tmp:
        base = measure(checkout(args.baseline_ref, Path(tmp)), texts)
    current = measure(ROOT, texts)
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
