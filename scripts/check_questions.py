"""Check a natural-question file against the shared corpus (schema in eval/README.md).

Usage: python3 scripts/check_questions.py eval/natural_questions.jsonl [more.jsonl ...]

Checks every line: required fields, kind, language, that an answerable question's ``answer`` is
a verbatim substring of its passage (same language as the question), that a near-miss's
``query_id`` has passages in the corpus, unique ids and questions. Prints one line per problem
and a count per (lang, kind); exits 1 when there is any problem.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "corpus.jsonl"
KINDS = ("answerable", "near_miss")
LANGS = ("en", "hi", "gu", "te")
MAX_ANSWER_CHARS = 80
"""Longest answer span: the fact asked for (a number with its unit, a name, a date, a short
phrase), not a sentence; a displayed answer 'contains the span' only means something if the
span is short."""


def check(rows: list[dict], passages: dict[str, dict], qids: set[int]) -> list[str]:
    """Problems found in ``rows`` (each a parsed JSONL line), as human-readable strings."""
    problems = []
    seen_ids, seen_questions = set(), set()
    for i, row in enumerate(rows, 1):
        where = f"line {i} ({row.get('id', '?')})"
        for key in ("id", "lang", "kind", "question", "query_id"):
            if key not in row:
                problems.append(f"{where}: missing {key!r}")
        if row.get("id") in seen_ids:
            problems.append(f"{where}: duplicate id")
        seen_ids.add(row.get("id"))
        question = " ".join(str(row.get("question", "")).split()).lower()
        if question in seen_questions:
            problems.append(f"{where}: duplicate question")
        seen_questions.add(question)
        if row.get("lang") not in LANGS:
            problems.append(f"{where}: lang {row.get('lang')!r} not in {LANGS}")
        if row.get("kind") not in KINDS:
            problems.append(f"{where}: kind {row.get('kind')!r} not in {KINDS}")
        if row.get("query_id") not in qids:
            problems.append(f"{where}: query_id {row.get('query_id')!r} has no passage")
        if row.get("kind") == "answerable":
            passage = passages.get(row.get("passage_id", ""))
            answer = row.get("answer", "")
            if passage is None:
                problems.append(f"{where}: passage_id {row.get('passage_id')!r} not in corpus")
                continue
            if passage["lang"] != row.get("lang"):
                problems.append(f"{where}: passage language {passage['lang']} != question's")
            if passage["query_id"] != row.get("query_id"):
                problems.append(f"{where}: query_id differs from the passage's")
            if not answer or len(answer) > MAX_ANSWER_CHARS:
                problems.append(f"{where}: answer must be 1-{MAX_ANSWER_CHARS} chars")
            elif answer not in passage["text"]:
                problems.append(f"{where}: answer {answer!r} not verbatim in {passage['id']}")
        elif row.get("kind") == "near_miss" and len(str(row.get("note", ""))) < 20:
            problems.append(f"{where}: a near-miss needs a note saying why no passage states it")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    passages = {}
    with CORPUS.open(encoding="utf-8") as fh:
        for line in fh:
            p = json.loads(line)
            passages[p["id"]] = p
    qids = {p["query_id"] for p in passages.values()}
    rows = []
    for path in args.files:
        with path.open(encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    problems = check(rows, passages, qids)
    for problem in problems:
        print(problem)
    counts = collections.Counter((r.get("lang"), r.get("kind")) for r in rows)
    print(", ".join(f"{lang} {kind} {n}" for (lang, kind), n in sorted(counts.items())))
    print(f"{len(rows)} questions, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
