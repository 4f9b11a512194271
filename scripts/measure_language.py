"""Accuracy of the language rule (``rag.language.detect_language``) on mixed-script questions.

    python scripts/measure_language.py

Reads ``tests/fixtures/mixed_script.tsv`` (English with Indic names, Indic with English terms,
Hindi typed in Latin letters) and prints, per group, how often the rule gives the expected
language, next to the rule it replaced (the script with the most Indic letters, whatever the
Latin ones). Then checks the rule against the language labels of the shared sample's queries
(``../shared/data/msmarco-xi-sample``: queries.jsonl and offcorpus.jsonl).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.language import detect_language  # noqa: E402

MIXED = ROOT / "tests" / "fixtures" / "mixed_script.tsv"
SAMPLE = ROOT.parent / "shared" / "data" / "msmarco-xi-sample"
_INDIC = ((0x0C00, 0x0C7F, "te"), (0x0A80, 0x0AFF, "gu"), (0x0900, 0x097F, "hi"))


def most_indic_letters(text: str) -> str:
    """The rule before issue 14: the Indic script with the most characters, else en."""
    counts = dict.fromkeys(("te", "gu", "hi"), 0)
    for ch in text:
        for lo, hi, lang in _INDIC:
            if lo <= ord(ch) <= hi:
                counts[lang] += 1
    lang, n = max(counts.items(), key=lambda kv: kv[1])
    return lang if n else "en"


def main() -> None:
    lines = [x for x in MIXED.read_text("utf-8").splitlines() if x and not x.startswith("#")]
    rows = [x.split("\t") for x in lines[1:]]
    print("| group | n | share of words (now) | most Indic letters (before) |")
    print("|---|---|---|---|")
    for group in dict.fromkeys(r[0] for r in rows):
        items = [(e, q) for g, e, q in rows if g == group]
        now = sum(detect_language(q) == e for e, q in items)
        before = sum(most_indic_letters(q) == e for e, q in items)
        print(f"| {group} | {len(items)} | {now}/{len(items)} | {before}/{len(items)} |")
    n = agree_now = agree_before = 0
    changed = []
    for name in ("queries.jsonl", "offcorpus.jsonl"):
        for line in (SAMPLE / name).read_text("utf-8").splitlines():
            query = json.loads(line)
            now, before = detect_language(query["text"]), most_indic_letters(query["text"])
            n += 1
            agree_now += now == query["lang"]
            agree_before += before == query["lang"]
            if now != before:
                changed.append(f"{query['lang']}: {before} -> {now}: {query['text']}")
    print(f"\nshared sample, {n} labelled queries: label matched {agree_now} now, "
          f"{agree_before} before; {len(changed)} changed:")
    for line in changed:
        print("  " + line)


if __name__ == "__main__":
    main()
