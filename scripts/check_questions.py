"""Check a natural-question file against the shared corpus (schema in eval/README.md).

Usage: python3 scripts/check_questions.py eval/natural_questions.jsonl [more.jsonl ...]
       python3 scripts/check_questions.py --training eval/training/*.jsonl

With ``--training`` the files are training questions and must also keep off the test set
(``eval/natural_questions.jsonl`` and ``eval/test_as_spoken.jsonl``): an en/hi question's
``query_id`` is one no test question uses, a gu/te answerable question's passage is one no test
question cites, and every row names its ``style`` (typed, spoken, code_mixed, latin) and
``answer_type``.

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
KINDS = ("answerable", "near_miss", "near_corpus")
LANGS = ("en", "hi", "gu", "te")
STYLES = ("typed", "spoken", "code_mixed", "latin")
"""How the question is written: typed with punctuation; as speech-to-text writes a voice note
(lowercase, no question mark, fillers); Hindi/Gujarati/Telugu with English words inside; Hindi
typed in Latin letters."""
ANSWER_TYPES = ("number", "date", "name", "place", "definition", "reason", "yes_no", "other")
TEST_FILES = ("natural_questions.jsonl", "test_as_spoken.jsonl")
MAX_ANSWER_CHARS = 80
"""Longest answer span: the fact asked for (a number with its unit, a name, a date, a short
phrase), not a sentence; a displayed answer 'contains the span' only means something if the
span is short."""


def test_rows() -> list[dict]:
    """The test set's rows (every file of ``TEST_FILES`` in ``eval/`` that exists)."""
    rows = []
    for name in TEST_FILES:
        path = ROOT / "eval" / name
        if path.exists():
            with path.open(encoding="utf-8") as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
    return rows


def check_training(rows: list[dict], test: list[dict]) -> list[str]:
    """Problems that make ``rows`` unfit for training beside the test set ``test``: an en/hi
    topic a test question uses, a gu/te passage a test question cites, a test question repeated,
    a missing or unknown ``style``/``answer_type``."""
    test_topics = {t["query_id"] for t in test}
    test_passages = {t.get("passage_id") for t in test if t.get("passage_id")}
    test_questions = {" ".join(t["question"].split()).lower() for t in test}
    problems = []
    for i, row in enumerate(rows, 1):
        where = f"line {i} ({row.get('id', '?')})"
        if row.get("style") not in STYLES:
            problems.append(f"{where}: style {row.get('style')!r} not in {STYLES}")
        if row.get("kind") != "near_corpus" and row.get("answer_type") not in ANSWER_TYPES:
            problems.append(f"{where}: answer_type {row.get('answer_type')!r} not in "
                            f"{ANSWER_TYPES}")
        if " ".join(str(row.get("question", "")).split()).lower() in test_questions:
            problems.append(f"{where}: question is in the test set")
        if row.get("lang") in ("en", "hi") and row.get("query_id") in test_topics:
            problems.append(f"{where}: topic {row.get('query_id')} is a test topic")
        if row.get("passage_id") in test_passages:
            problems.append(f"{where}: passage {row.get('passage_id')} is cited by a test question")
    return problems


def check(rows: list[dict], passages: dict[str, dict], qids: set[int]) -> list[str]:
    """Problems found in ``rows`` (each a parsed JSONL line), as human-readable strings."""
    problems = []
    seen_ids, seen_questions = set(), set()
    for i, row in enumerate(rows, 1):
        where = f"line {i} ({row.get('id', '?')})"
        for key in ("id", "lang", "kind", "question") + (
                () if row.get("kind") == "near_corpus" else ("query_id",)):
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
        if row.get("kind") != "near_corpus" and row.get("query_id") not in qids:
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
        elif row.get("kind") in ("near_miss", "near_corpus") and \
                len(str(row.get("note", ""))) < 20:
            problems.append(f"{where}: a {row.get('kind')} needs a note saying why no passage "
                            "states it")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--training", action="store_true",
                        help="training questions: also keep off the test set's topics/passages")
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
    if args.training:
        problems += check_training(rows, test_rows())
    for problem in problems:
        print(problem)
    counts = collections.Counter((r.get("lang"), r.get("kind")) for r in rows)
    print(", ".join(f"{lang} {kind} {n}" for (lang, kind), n in sorted(counts.items())))
    print(f"{len(rows)} questions, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
