"""Extractive answers: the best-supported sentence of the top passage, in the user's script.

A sentence's support is the share of the query's content tokens it contains
(:func:`rag.text.coverage`, which matches "cost" with "costs" and "कीमत" with "कीमतें").
Ties go to the earlier sentence. A sentence shorter than ``MIN_ANSWER_CHARS`` is joined with
the next one, so a bare heading is never the whole answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag.text import content_tokens, coverage, split_sentences
from rag.types import Hit, Passage

MIN_ANSWER_CHARS = 60


@dataclass(frozen=True, slots=True)
class ExtractiveAnswer:
    """``source`` is the passage the text comes from (the top hit, or its sibling translation in
    the query's language); ``support`` is the share of query content tokens it covers (0–1)."""

    text: str
    source: Passage
    support: float


def best_sentence(query: str, passage: Passage, lang: str | None = None) -> tuple[str, float]:
    """The passage's best-supported sentence (joined with the next when short) and its support."""
    sentences = split_sentences(passage.text) or [passage.text]
    query_tokens = set(content_tokens(query, lang))
    best_i, best_support = 0, 0.0
    for i, sentence in enumerate(sentences):
        support = coverage(query_tokens, sentence)
        if support > best_support:
            best_i, best_support = i, support
    text = sentences[best_i]
    if len(text) < MIN_ANSWER_CHARS and best_i + 1 < len(sentences):
        text = f"{text} {sentences[best_i + 1]}"
    return text, best_support


def extract_answer(
    query: str, lang: str, top: Hit, sibling: Passage | None = None
) -> ExtractiveAnswer:
    """Answer from ``sibling`` (the top passage's translation in ``lang``) when given, else from
    the top passage itself."""
    source = sibling if sibling is not None else top.passage
    text, support = best_sentence(query, source, lang)
    return ExtractiveAnswer(text, source, support)
