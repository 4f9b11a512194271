"""Retrieval, answer and refusal evaluation on the real shared sample.

    python scripts/evaluate.py                          # index from VOICE_RAG_INDEX_DIR
    python scripts/evaluate.py --index data/index --json docs/eval.json

Natural questions (``eval/natural_questions.jsonl``, written for this project): per language,
answerable questions answered correctly (the displayed answer contains the verbatim span),
answered wrongly, refused, and near-misses answered, with the median answer length. The shipped
selector and gate were fitted on these questions, so these numbers are in-sample; the
out-of-fold ones come from ``scripts/fit_answering.py``.

Retrieval: HitRate@10 and MRR@10 per language over queries with ``gold_ids`` (auto-detected
language, as the product searches). Refusal: share answered per category and language —
answerable (gold in corpus), "No Answer Present" (on topic, MS MARCO marked no passage as
answering), off-corpus questions, and dataset questions whose passages are not in the sample (an
approximate negative set, capped by ``--not-in-corpus``) — plus false-refusal rate, false-answer
rate and balanced accuracy (answerable vs off-corpus + "No Answer Present").
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.pipeline import Pipeline  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402
from rag.types import LANGUAGES  # noqa: E402

K = 10
CATEGORIES = ("answerable", "no_answer_present", "off_corpus", "not_in_corpus")


@dataclass
class Case:
    text: str
    lang: str
    category: str
    gold_ids: list[str] = field(default_factory=list)
    query_id: int | None = None
    query_type: str | None = None


def load_cases(data_dir: Path, n_not_in_corpus: int, seed: int = 0) -> list[Case]:
    """Every labelled case of the shared sample; ``n_not_in_corpus`` per language at random."""
    cases: list[Case] = []
    absent: dict[str, list[Case]] = defaultdict(list)
    with (data_dir / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if q["gold_ids"]:
                category = "answerable"
            elif q["has_passages_in_corpus"] and q["gold_passage_indices"] == []:
                category = "no_answer_present"
            elif not q["has_passages_in_corpus"]:
                category = "not_in_corpus"
            else:
                continue  # in corpus, gold passage in another language only
            case = Case(
                q["text"], q["lang"], category, q["gold_ids"], q["query_id"], q["query_type"]
            )
            (absent[q["lang"]] if category == "not_in_corpus" else cases).append(case)
    rng = random.Random(seed)
    for lang in LANGUAGES:
        pool = absent[lang]
        cases.extend(rng.sample(pool, min(n_not_in_corpus, len(pool))))
    with (data_dir / "offcorpus.jsonl").open(encoding="utf-8") as fh:
        cases.extend(Case(r["text"], r["lang"], "off_corpus") for r in map(json.loads, fh))
    return cases


def retrieval_metrics(pipeline: Pipeline, cases: list[Case]) -> dict[str, dict]:
    """HitRate@10 and MRR@10 per language, retrieved as the pipeline retrieves (auto-detected
    language, +bonus pool; hybrid where ``rag/fusion.json`` says)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for case in cases:
        if case.category != "answerable":
            continue
        vector = pipeline.encode_query(case.text)
        hits, _ = pipeline.search(case.text, vector, case.lang, is_explicit=False, k=K)
        ids = [h.passage.id for h in hits]
        rank = next((i + 1 for i, pid in enumerate(ids) if pid in case.gold_ids), None)
        row = sums[case.lang]
        row[0] += 1
        row[1] += rank is not None
        row[2] += 1 / rank if rank else 0.0
    return {
        lang: {"n": int(n), "hit_rate@10": hits / n, "mrr@10": rr / n}
        for lang, (n, hits, rr) in sums.items()
    }


def refusal_metrics(answered: dict[str, dict[str, list[bool]]]) -> dict[str, dict]:
    """Per language: n and share answered per category, false-refusal and false-answer rates,
    balanced accuracy (mean of answerable recall and unanswerable refusal rate)."""
    out = {}
    for lang, by_cat in answered.items():
        row: dict = {}
        for cat in CATEGORIES:
            flags = by_cat.get(cat, [])
            row[cat] = {"n": len(flags), "answered": (sum(flags) / len(flags)) if flags else None}
        pos = by_cat.get("answerable", [])
        neg = by_cat.get("off_corpus", []) + by_cat.get("no_answer_present", [])
        tpr = sum(pos) / len(pos) if pos else None
        fpr = sum(neg) / len(neg) if neg else None
        row["false_refusal_rate"] = None if tpr is None else 1 - tpr
        row["false_answer_rate"] = fpr
        row["balanced_accuracy"] = None if tpr is None or fpr is None else (tpr + 1 - fpr) / 2
        out[lang] = row
    return out


def run(pipeline: Pipeline, cases: list[Case]) -> dict:
    """Answer every case; ``refusal`` is the full pipeline, ``refusal_floors`` what the floors
    alone would have answered (the relevance guard passed)."""
    answered: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    floors: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for case in cases:
        result = pipeline.ask(case.text)
        relevance = result.trace.get("relevance_guard")
        answered[case.lang][case.category].append(result.is_answered)
        floors[case.lang][case.category].append(
            relevance is not None and relevance.decision == "passed"
        )
    return {
        "retrieval": retrieval_metrics(pipeline, cases),
        "refusal": refusal_metrics(answered),
        "refusal_floors": refusal_metrics(floors),
        "natural": natural_metrics(pipeline) if NATURAL.is_file() else {},
    }


NATURAL = Path(__file__).resolve().parents[1] / "eval" / "natural_questions.jsonl"


def natural_metrics(pipeline: Pipeline, path: Path = NATURAL) -> dict[str, dict]:
    """Answer every natural question with the full pipeline; per language the share (and n) of
    answerable ones answered correctly / wrongly / refused, near-misses answered, and the median
    length of the answers given (characters)."""
    flags: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    chars: dict[str, list[int]] = defaultdict(list)
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:
        result = pipeline.ask(row["question"])
        f = flags[row["lang"]]
        if result.is_answered:
            chars[row["lang"]].append(len(result.answer))
        if row["kind"] == "answerable":
            correct = result.is_answered and row["answer"] in result.answer
            f["correct"].append(correct)
            f["wrong"].append(result.is_answered and not correct)
            f["refused"].append(not result.is_answered)
        else:
            f["near_miss_answered"].append(result.is_answered)
    out = {}
    for lang, by_key in flags.items():
        out[lang] = {k: {"n": len(v), "share": sum(v) / len(v)} for k, v in by_key.items()}
        out[lang]["median_answer_chars"] = statistics.median(chars[lang]) if chars[lang] else None
    return out


def print_natural(natural: dict) -> None:
    print("natural questions, % (n)")
    keys = ("correct", "wrong", "refused", "near_miss_answered")
    print(f"{'lang':<5}" + "".join(f"{k:>22}" for k in keys) + f"{'median chars':>14}")
    for lang in LANGUAGES:
        r = natural.get(lang)
        if not r:
            continue
        cells = "".join(
            f"{_pct(r[k]['share']):>15} ({r[k]['n']:>4})" if k in r else f"{'-':>22}"
            for k in keys
        )
        print(f"{lang:<5}{cells}{str(r['median_answer_chars']):>14}")


def _pct(x: float | None) -> str:
    return "  n/a" if x is None else f"{100 * x:5.1f}"


def print_report(report: dict) -> None:
    if report["retrieval"]:
        print(f"{'lang':<5}{'n':>5}{'HitRate@10':>12}{'MRR@10':>9}")
        for lang in LANGUAGES:
            r = report["retrieval"].get(lang)
            if r:
                print(f"{lang:<5}{r['n']:>5}{r['hit_rate@10']:>12.3f}{r['mrr@10']:>9.3f}")
        print()
    if report.get("natural"):
        print_natural(report["natural"])
        print()
    print_refusals(report["refusal"])


def print_refusals(refusal: dict) -> None:
    print("share answered, % (n)")
    head = "".join(f"{c:>24}" for c in CATEGORIES)
    print(f"{'lang':<5}{head}{'false-refusal':>15}{'false-answer':>14}{'bal.acc':>9}")
    for lang in LANGUAGES:
        r = refusal.get(lang)
        if not r:
            continue
        cells = "".join(f"{_pct(r[c]['answered']):>17} ({r[c]['n']:>4})" for c in CATEGORIES)
        bal = "n/a" if r["balanced_accuracy"] is None else f"{r['balanced_accuracy']:.3f}"
        print(
            f"{lang:<5}{cells}{_pct(r['false_refusal_rate']):>15}"
            f"{_pct(r['false_answer_rate']):>14}{bal:>9}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, help="index folder (default VOICE_RAG_INDEX_DIR)")
    parser.add_argument("--data", type=Path, default=SHARED_SAMPLE.parent)
    parser.add_argument(
        "--not-in-corpus", type=int, default=300, help="not-in-corpus queries sampled per language"
    )
    parser.add_argument("--json", type=Path, help="also write the report as JSON")
    args = parser.parse_args(argv)
    settings = RagSettings.from_env()
    if args.index:
        settings = replace(settings, index_dir=args.index)
    pipeline = Pipeline.from_settings(settings)
    report = run(pipeline, load_cases(args.data, args.not_in_corpus))
    report["encoder"] = pipeline.encoder.name
    report["n_passages"] = len(pipeline.index)
    print(f"encoder {report['encoder']}, {report['n_passages']} passages\n")
    print_report(report)
    if pipeline.answers.gate is not None:
        print("\nfloors alone, same run:")
        print_refusals(report["refusal_floors"])
        print(
            "(the selector and gate were fitted on these cases: out-of-fold numbers come from "
            "scripts/fit_answering.py)"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
