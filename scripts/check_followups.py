"""Check follow-up pair files against the shared corpus (schema in eval/followups/README.md).

Usage: python3 scripts/check_followups.py eval/followups/*.jsonl

Checks every line: required fields, kind, language and style; that ``first.answer`` and (for
``followup`` and ``switch``) ``answer`` are verbatim substrings of their passages, in the
pair's language, on the topics the row names, at most 80 characters; that a ``followup`` or
``no_answer`` stays on the first question's topic and a ``switch`` leaves it, with
``full_question`` equal to ``question``; that ``no_answer`` rows name no passage and say in
``note`` what the topic covers; that test files (``test_*``) use only test topics and training
files (``train_*``) only training topics (en/hi: the topics of ``eval/natural_questions.jsonl``
vs those of ``eval/training``; gu/te: the corpus's topics at odd vs even positions by
``query_id``); unique ids. Prints one line per problem and a count per (file, kind); exits 1
when there is any problem.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "msmarco-xi-sample" / "corpus.jsonl"
KINDS = ("followup", "switch", "no_answer")
LANGS = ("en", "hi", "gu", "te")
STYLES = ("typed", "spoken", "code_mixed", "latin")
MAX_ANSWER_CHARS = 80
"""As the training questions' spans (scripts/check_questions.py): the fact, not a sentence."""


def topic_split(corpus: dict[str, dict]) -> dict[str, dict[str, set[int]]]:
    """``{lang: {"test": topics, "train": topics}}``: en/hi from the test and training question
    files, gu/te by position among the language's sorted topics (odd: test, even: train)."""
    def topics(paths: list[Path]) -> set[int]:
        return {json.loads(line)["query_id"] for p in paths for line in p.open(encoding="utf-8")
                if line.strip()}

    test = topics([ROOT / "eval" / "natural_questions.jsonl"])
    train = topics(sorted((ROOT / "eval" / "training").glob("*.jsonl")))
    split = {lang: {"test": test, "train": train} for lang in ("en", "hi")}
    for lang in ("gu", "te"):
        ordered = sorted({p["query_id"] for p in corpus.values() if p["lang"] == lang})
        split[lang] = {"test": set(ordered[1::2]), "train": set(ordered[0::2])}
    return split


def check_row(row: dict, corpus: dict[str, dict], allowed: set[int] | None) -> list[str]:
    """The problems of one row (empty when none); ``allowed`` the topics its split may use."""
    problems = []
    missing = [k for k in ("id", "lang", "style", "kind", "query_id", "first", "question",
                           "full_question") if k not in row]
    if missing:
        return [f"missing {', '.join(missing)}"]
    lang, kind, first = row["lang"], row["kind"], row["first"]
    if lang not in LANGS or kind not in KINDS or row["style"] not in STYLES:
        return [f"unknown lang/kind/style {lang}/{kind}/{row['style']}"]
    if not isinstance(first, dict) or not all(k in first for k in
                                              ("question", "query_id", "passage_id", "answer")):
        return ["first lacks question, query_id, passage_id or answer"]
    spans = [("first", first["passage_id"], first["answer"], first["query_id"])]
    if kind == "no_answer":
        if row.get("passage_id") or row.get("answer"):
            problems.append("a no_answer row names a passage or answer")
        if not row.get("note"):
            problems.append("a no_answer row has no note")
    else:
        spans.append(("answer", row.get("passage_id"), row.get("answer"), row["query_id"]))
    for name, pid, answer, topic in spans:
        passage = corpus.get(pid or "")
        if passage is None:
            problems.append(f"{name}: unknown passage {pid!r}")
            continue
        if passage["lang"] != lang or passage["query_id"] != topic:
            problems.append(f"{name}: {pid} is not a {lang} passage of topic {topic}")
        if not answer or answer not in passage["text"] or len(answer) > MAX_ANSWER_CHARS:
            problems.append(f"{name}: span {answer!r} not verbatim in {pid} (or over "
                            f"{MAX_ANSWER_CHARS} characters)")
    same_topic = row["query_id"] == first["query_id"]
    if kind == "switch" and (same_topic or row["full_question"] != row["question"]):
        problems.append("a switch must change topic and repeat its question as full_question")
    if kind != "switch" and not same_topic:
        problems.append(f"a {kind} must stay on the first question's topic")
    if allowed is not None and not {row["query_id"], first["query_id"]} <= allowed:
        problems.append("a topic outside the file's split (test/train)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args(argv)
    corpus = {p["id"]: p for p in map(json.loads, CORPUS.open(encoding="utf-8"))}
    split = topic_split(corpus)
    seen: set[str] = set()
    n_problems = 0
    for path in args.files:
        kind_of = path.name.split("_")[0]
        counts: collections.Counter = collections.Counter()
        for n, line in enumerate(path.open(encoding="utf-8"), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            allowed = split.get(row.get("lang"), {}).get(kind_of)
            problems = check_row(row, corpus, allowed)
            if row.get("id") in seen:
                problems.append(f"duplicate id {row.get('id')}")
            seen.add(row.get("id"))
            for problem in problems:
                print(f"{path.name}:{n} {row.get('id')}: {problem}")
            n_problems += len(problems)
            counts[(row.get("lang"), row.get("kind"))] += 1
        print(f"{path.name}: " + ", ".join(f"{lang} {kind} {n}"
                                            for (lang, kind), n in sorted(counts.items())))
    print(f"{n_problems} problems")
    return 1 if n_problems else 0


if __name__ == "__main__":
    sys.exit(main())
