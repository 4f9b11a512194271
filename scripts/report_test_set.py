"""The shipped pipeline on the test set, once, beside the pipeline of an earlier checkout.

    python scripts/report_test_set.py                          # this checkout and b91396e
    python scripts/report_test_set.py --questions eval/training/*.jsonl --no-offcorpus
    python scripts/report_test_set.py --json docs/test_report.json --plot docs/img/test_set.png

The test set is ``eval/natural_questions.jsonl`` (typed) and ``eval/test_as_spoken.jsonl`` (the
same questions as speech-to-text writes them, and Hindi in Latin letters), plus the shared
sample's off-corpus questions; nothing in this project is fitted, tuned or chosen on it
(``eval/README.md``). Each side runs in its own process, over an index of the whole shared
sample built by its own code with its own default encoder (as ``scripts/bench_answer_stage.py``
does; the baseline's index is cached by commit), with its own fitted files, and asks every
question with the language auto-detected, as a chat does. A question is answered correctly when
the displayed answer contains its answer span (``eval/README.md``).

Prints, per language and style: answerable questions answered confidently and correctly /
wrongly, hedged (``Status.HEDGED``, issue 31) holding the fact / not, the fact delivered
(confident or hedged), refused, and near-misses answered confidently / hedged, with n;
off-corpus questions answered (either kind). A checkout without hedged answers shows 0 there.
gu/te test questions share topics with the training questions (their passages differ).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_answer_stage import (  # noqa: E402
    ANSWER_STAGES,
    BASELINE_REF,
    CACHE,
    SAMPLE,
    build_index,
    checkout,
    side_env,
    topic_corpus,
)

TEST_FILES = (ROOT / "eval" / "natural_questions.jsonl", ROOT / "eval" / "test_as_spoken.jsonl")

_MEASURE = r"""
import json, sys
from rag.pipeline import Pipeline
from rag.settings import RagSettings
STAGES, PASSES = sys.argv[1].split(","), int(sys.argv[2])
pipeline = Pipeline.from_settings(RagSettings.from_env())
texts = json.load(sys.stdin)
for _ in range(PASSES - 1):  # warm-up passes; the last is reported, no vector kept from them
    for text in texts:
        pipeline.ask(text)
if hasattr(pipeline, "embeddings"):
    pipeline.embeddings = type(pipeline.embeddings)(max_entries=0)
out = []
for text in texts:
    r = pipeline.ask(text)
    ms = sum(s.elapsed_ms for s in r.trace.stages if s.name in STAGES)
    out.append([bool(r.is_answered), r.answer or "", r.status.value, ms])
print(json.dumps(out, ensure_ascii=False))
"""


def load_rows(paths: list[Path], offcorpus: bool) -> list[dict]:
    rows = []
    for path in paths:
        for r in map(json.loads, path.open(encoding="utf-8")):
            rows.append({**r, "style": r.get("style", "typed")})
    if offcorpus:
        for r in map(json.loads, (SAMPLE / "offcorpus.jsonl").open(encoding="utf-8")):
            rows.append({"question": r["text"], "lang": r["lang"], "kind": "off_corpus",
                         "style": "typed"})
    return rows


def ask_all(code_dir: Path, env: dict[str, str], texts: list[str], passes: int = 2) -> list[list]:
    proc = subprocess.run([sys.executable, "-c", _MEASURE, ",".join(ANSWER_STAGES), str(passes)],
                          input=json.dumps(texts),
                          capture_output=True, text=True, env=env, cwd=code_dir)
    if proc.returncode:
        raise SystemExit(f"{code_dir}: the pipeline failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(rows: list[dict], answers: list[list]) -> dict:
    """{(lang, style): {"n_answerable", "correct", "wrong", "hedged_right", "hedged_wrong",
    "delivered", "refused", "n_near_miss", "near_miss_answered", "near_miss_hedged",
    "n_off_corpus", "off_corpus_answered"}} (shares 0-1; ``correct``/``wrong``/
    ``near_miss_answered`` count confident answers, ``off_corpus_answered`` either kind)."""
    acc: dict = defaultdict(lambda: defaultdict(list))
    for row, (answered, answer, status, _ms) in zip(rows, answers, strict=True):
        hedged = status == "hedged"
        for key in ((row["lang"], row["style"]), (row["lang"], "all")):
            cell = acc[key]
            if row["kind"] == "answerable":
                holds = (answered or hedged) and row["answer"] in answer
                cell["correct"].append(answered and holds)
                cell["wrong"].append(answered and not holds)
                cell["hedged_right"].append(hedged and holds)
                cell["hedged_wrong"].append(hedged and not holds)
                cell["delivered"].append(holds)
                cell["refused"].append(not (answered or hedged))
            elif row["kind"] == "near_miss":
                cell["near_miss_answered"].append(answered)
                cell["near_miss_hedged"].append(hedged)
            else:
                cell[f"{row['kind']}_answered"].append(answered or hedged)
    return {key: {**{k: sum(v) / len(v) for k, v in cell.items()},
                  "n_answerable": len(cell["correct"]),
                  "n_near_miss": len(cell["near_miss_answered"]),
                  "n_off_corpus": len(cell["off_corpus_answered"])}
            for key, cell in acc.items()}


def pct(cell: dict, key: str, n_key: str) -> str:
    return f"{100 * cell[key]:5.1f}" if cell.get(n_key) else "    -"


def print_table(title: str, result: dict) -> None:
    print(f"\n{title}")
    print("(conf: confident answers; hedged: right = holds the fact; delivered: either holds it;"
          " nm: near-misses; off: off-corpus, answered either way)")
    print(f"{'lang':<5}{'style':<11}{'n':>5}{'conf ok':>9}{'wrong':>7}{'hedg ok':>9}"
          f"{'wrong':>7}{'deliv':>7}{'refused':>9}{'n nm':>6}{'nm conf':>8}{'nm hedg':>8}"
          f"{'n off':>7}{'off ans':>9}")
    for (lang, style), c in sorted(result.items(), key=lambda kv: (
            "en hi gu te".split().index(kv[0][0]), kv[0][1] != "all", kv[0][1])):
        print(f"{lang:<5}{style:<11}{c['n_answerable']:>5}{pct(c, 'correct', 'n_answerable'):>9}"
              f"{pct(c, 'wrong', 'n_answerable'):>7}{pct(c, 'hedged_right', 'n_answerable'):>9}"
              f"{pct(c, 'hedged_wrong', 'n_answerable'):>7}"
              f"{pct(c, 'delivered', 'n_answerable'):>7}{pct(c, 'refused', 'n_answerable'):>9}"
              f"{c['n_near_miss']:>6}{pct(c, 'near_miss_answered', 'n_near_miss'):>8}"
              f"{pct(c, 'near_miss_hedged', 'n_near_miss'):>8}"
              f"{c['n_off_corpus']:>7}{pct(c, 'off_corpus_answered', 'n_off_corpus'):>9}")


def plot_kinds(result: dict, out: Path) -> None:
    """Confident / hedged / refused shares of the answerable test questions per language (both
    styles), stacked, with near-misses and off-corpus questions answered (either kind) beside
    them: ``result`` is one side's :func:`table`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    langs = [lang for lang in ("en", "hi", "gu", "te") if (lang, "all") in result]
    cells = [result[(lang, "all")] for lang in langs]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    xs = np.arange(len(langs))
    bottom = np.zeros(len(langs))
    for key, label, colour in (("correct", "confident, right", "#2e8b57"),
                               ("wrong", "confident, wrong", "#c0392b"),
                               ("hedged_right", "hedged, holds the fact", "#7fb3d5"),
                               ("hedged_wrong", "hedged, misses it", "#f5b7b1"),
                               ("refused", "refused", "#d5d8dc")):
        values = np.array([100 * c.get(key, 0.0) for c in cells])
        ax.bar(xs - 0.15, values, 0.3, bottom=bottom, label=label, color=colour)
        bottom += values
    nm = [100 * (c.get("near_miss_answered", 0) + c.get("near_miss_hedged", 0)) for c in cells]
    ax.bar(xs + 0.2, nm, 0.2, color="#8e44ad", label="near-misses answered (either)")
    ax.set_xticks(xs, [f"{lang}\nn={c['n_answerable']}" for lang, c in zip(langs, cells,
                                                                          strict=True)])
    ax.set_ylabel("% of the test questions")
    ax.set_title("Test set (typed + spoken): confident / hedged / refused per language")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"written {out}")


def plot(results: dict[str, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    keys = sorted({k for r in results.values() for k in r if k[1] != "all"
                   and r[k]["n_answerable"]},
                  key=lambda k: ("en hi gu te".split().index(k[0]), k[1]))
    fig, ax = plt.subplots(figsize=(10, 3.8))
    width = 0.8 / len(results)
    for j, (name, r) in enumerate(results.items()):
        xs = np.arange(len(keys)) + j * width
        correct = [100 * r.get(k, {}).get("correct", np.nan) for k in keys]
        wrong = [100 * r.get(k, {}).get("wrong", np.nan) for k in keys]
        ax.bar(xs, correct, width, label=f"{name}: correct")
        ax.bar(xs, wrong, width, bottom=correct, label=f"{name}: wrong", alpha=0.5)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2, [f"{lang}\n{s}" for lang, s in keys],
                  fontsize=8)
    ax.set_ylabel("% of answerable test questions")
    ax.set_title("Test set: answered correctly (and wrongly, stacked), per language and style")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"written {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=Path, nargs="+", default=list(TEST_FILES))
    parser.add_argument("--no-offcorpus", action="store_true")
    parser.add_argument("--baseline-ref", default=BASELINE_REF, help="'' for none")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--passes", type=int, default=2, help="passes over the questions per "
                        "side; the last is reported (1: one fresh pass, nothing warmed)")
    parser.add_argument("--plot-kinds", type=Path, help="PNG of this checkout's confident / "
                        "hedged / refused shares per language")
    args = parser.parse_args(argv)
    rows = load_rows(args.questions, not args.no_offcorpus)
    texts = [r["question"] for r in rows]
    results, answers = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        key = topic_corpus(None, corpus)  # the whole sample, as bench_answer_stage's default
        if args.baseline_ref:
            sha = subprocess.run(["git", "rev-parse", args.baseline_ref], cwd=ROOT, text=True,
                                 capture_output=True, check=True).stdout.strip()
            base_dir = checkout(sha, Path(tmp))
            index_dir = CACHE / f"{sha[:12]}-{key}"
            env = side_env(base_dir, index_dir, own_defaults=True)
            if not (index_dir / "meta.json").is_file():
                build_index(base_dir, corpus, env)
            answers[f"baseline {args.baseline_ref}"] = ask_all(base_dir, env, texts, args.passes)
            results[f"baseline {args.baseline_ref}"] = table(
                rows, answers[f"baseline {args.baseline_ref}"])
        answers["this checkout"] = ask_all(ROOT, dict(os.environ), texts, args.passes)
        results["this checkout"] = table(rows, answers["this checkout"])
    print(f"{len(rows)} questions from {', '.join(p.name for p in args.questions)}"
          + ("" if args.no_offcorpus else " + off-corpus"))
    for name, result in results.items():
        print_table(name, result)
    print(f"\nanswer stage ({' + '.join(ANSWER_STAGES)}), ms, pass {args.passes} with no vector "
          "kept from earlier passes, each side in the same run: P50 / P95 over the questions it "
          "answered (confident or hedged); over all")
    for name, rows_ in answers.items():
        shown = np.array([r[3] for r in rows_ if r[2] in ("answered", "hedged")] or [0.0])
        every = np.array([r[3] for r in rows_])
        print(f"  {name:<22} {np.median(shown):7.2f} / {np.percentile(shown, 95):7.2f}   "
              f"{np.median(every):7.2f} / {np.percentile(every, 95):7.2f}  (n {len(shown)} "
              f"of {len(every)})")
    if args.json:
        args.json.write_text(json.dumps({name: {" ".join(k): v for k, v in r.items()}
                                         for name, r in results.items()}, indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)
    if args.plot_kinds:
        plot_kinds(results["this checkout"], args.plot_kinds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
