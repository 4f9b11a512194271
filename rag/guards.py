"""The guards: input, relevance, lexical support, grounding. Each returns a named verdict; none
raises.

Thresholds come from :class:`rag.settings.RagSettings`, where their sources are noted.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from rag.language import script_of
from rag.numbers import side_by_side
from rag.settings import RagSettings
from rag.text import clean_query, content_tokens, token_matches, tokenize
from rag.types import QuestionCut, Reason, ReasonCode

# Prompt-injection phrasings seen in public jailbreak lists and peer input guards (en, hi).
_INJECTION = re.compile(
    r"ignore\s+(all\s+|the\s+|any\s+)?(previous|prior|above|earlier)\s+(instructions|prompts?|rules)"
    r"|disregard\s+(all\s+|the\s+)?(previous|prior|above|your)\s+"
    r"|(reveal|show|print|repeat)\s+(me\s+)?(your|the)\s+(system\s+)?(prompt|instructions)"
    r"|system\s+prompt|you\s+are\s+now\s+|act\s+as\s+(an?\s+)?(unrestricted|jailbroken|dan)\b"
    r"|jailbreak|developer\s+mode"
    r"|पिछले\s+(सभी\s+)?निर्देशों\s+को\s+(अनदेखा|नज़रअंदाज़|नजरअंदाज)",
    re.IGNORECASE,
)

@dataclass(frozen=True, slots=True)
class InputVerdict:
    """``text`` is the cleaned query (its beginning when it was cut: ``cut``); ``refusal`` is
    None when the query passes, else its :class:`Reason` (codes ``empty``, ``too_short``,
    ``garbled``, ``unsupported_language``, ``injection``); ``detail`` is the operator's line for
    the trace."""

    is_ok: bool
    text: str
    detail: str
    refusal: Reason | None = None
    cut: QuestionCut | None = None


def check_input(query: str, settings: RagSettings) -> InputVerdict:
    """Reject empty, garbled, unsupported-script and prompt-injection queries; the query is
    first cleaned by :func:`rag.text.clean_query` (control characters, lone surrogates,
    zero-width spaces removed; NFKC; whitespace folded; a typed "query:" prefix removed; native
    digits as ASCII). A query over ``settings.max_query_chars`` characters is cut to them
    (:func:`cut_question`) and checked as cut: the verdict's ``cut`` says so, and the reply
    states the limit."""
    text = clean_query(query or "")
    if not text:
        return _refused(ReasonCode.EMPTY, text, "no text")
    text, cut = cut_question(text, settings.max_query_chars)
    letters = _letters(text)
    if len(letters) < settings.min_query_chars:
        return _refused(ReasonCode.TOO_SHORT, text, f"{len(letters)} letters", cut,
                        n_letters=len(letters))
    # letters and marks of the scripts the product serves: Latin, Devanagari, Gujarati, Telugu
    n_supported = sum(script_of(ch) is not None for ch in letters)
    if n_supported < len(letters) / 2:
        return _refused(
            ReasonCode.UNSUPPORTED_LANGUAGE, text,
            f"{len(letters) - n_supported}/{len(letters)} letters outside en/hi/gu/te scripts",
            cut,
        )
    if _INJECTION.search(text):
        return _refused(ReasonCode.INJECTION, text, "prompt-injection phrasing", cut)
    garbled = _garbled_reason(text, len(letters))
    if garbled:
        return _refused(ReasonCode.GARBLED, text, garbled, cut)
    size = f"{len(text)} chars" if cut is None else \
        f"{cut.n_chars} chars cut to {cut.n_kept} (limit {cut.max_chars})"
    return InputVerdict(True, text, size, cut=cut)


def _refused(code: ReasonCode, text: str, detail: str, cut: QuestionCut | None = None,
             **numbers: int) -> InputVerdict:
    return InputVerdict(False, text, detail, Reason(code, detail, **numbers), cut)


CUT_WORD_FRACTION = 0.9
"""A question over the limit is cut at the last space in its final tenth before the limit (a
word kept whole); with no space there (one long run of letters, e.g. a URL) it is cut at the
limit itself."""


def cut_question(text: str, max_chars: int) -> tuple[str, QuestionCut | None]:
    """``text`` (cleaned) cut to at most ``max_chars`` characters, at a word boundary where one
    is in the last tenth (:data:`CUT_WORD_FRACTION`), and the :class:`QuestionCut` saying so;
    ``(text, None)`` when it fits."""
    if len(text) <= max_chars:
        return text, None
    kept = text[:max_chars]
    space = kept.rfind(" ")
    if space >= max_chars * CUT_WORD_FRACTION:
        kept = kept[:space]
    kept = kept.rstrip()
    return kept, QuestionCut(len(text), len(kept), max_chars)


def _letters(text: str) -> list[str]:
    """The letters of ``text`` with the combining marks attached to them (Indic matras,
    viramas, accents): a mark counts only after a letter or another attached mark, with format
    characters (ZWJ/ZWNJ) between them skipped, so stray marks with no base ("ँऀ99", found by
    tests/test_fuzz.py) are not letters and cannot make a number or noise pass as a question."""
    out: list[str] = []
    attached = False
    for ch in text:
        category = unicodedata.category(ch)
        if category[0] == "L" or (category[0] == "M" and attached):
            out.append(ch)
            attached = True
        elif category != "Cf":
            attached = False
    return out


def _garbled_reason(text: str, n_letters: int) -> str:
    """Why ``text`` looks like noise (speech-to-text junk, key mashing), or ``""``. A run of one
    symbol ("??????", "😀😀😀") counts once, and only letters count as repeated characters, so
    emphatic punctuation, emoji and numbers such as 1000000 pass."""
    folded = re.sub(r"([^\w\s])\1+", r"\1", text)
    non_space = sum(not ch.isspace() for ch in folded)
    if n_letters / non_space < 0.5:
        return f"letters {n_letters}/{non_space} of non-space chars"
    tokens = tokenize(text)
    if tokens and max(map(len, tokens)) > 40:
        return "a token over 40 chars"
    if len(tokens) >= 4 and len(set(tokens)) == 1:
        return f"one word repeated {len(tokens)} times"
    if re.search(r"([^\W\d_])\1{5,}", text):
        return "a letter repeated 6+ times"
    return ""


@dataclass(frozen=True, slots=True)
class RelevanceVerdict:
    """The relevance guard's verdict; ``top_score`` and ``floor`` are cosines, ``lang`` the
    query language whose floor applied."""

    is_ok: bool
    is_low_confidence: bool
    top_score: float | None
    floor: float
    detail: str
    lang: str

    @property
    def refusal(self) -> Reason | None:
        """None when the guard passed; else ``no_passages`` or ``below_floor`` with numbers."""
        if self.is_ok:
            return None
        code = ReasonCode.NO_PASSAGES if self.top_score is None else ReasonCode.BELOW_FLOOR
        return Reason(code, self.detail, score=self.top_score, floor=self.floor, lang=self.lang)


def check_relevance(top_score: float | None, lang: str, settings: RagSettings) -> RelevanceVerdict:
    """Compare the top hit's cosine with the floor of the query's language.

    Within ``low_confidence_band`` above the floor the query is answered, flagged low-confidence.
    """
    floor = settings.floor(lang)
    if top_score is None:
        return RelevanceVerdict(
            False, False, None, floor, f"no passages < floor {floor:.3f} ({lang})", lang
        )
    score_text, floor_text = side_by_side(top_score, floor)  # never "0.850 < floor 0.850"
    if top_score < floor:
        return RelevanceVerdict(
            False, False, top_score, floor, f"top {score_text} < floor {floor_text} ({lang})",
            lang,
        )
    is_low = top_score < floor + settings.low_confidence_band
    band = " (low confidence)" if is_low else ""
    return RelevanceVerdict(
        True, is_low, top_score, floor, f"top {score_text} >= floor {floor_text} ({lang}){band}",
        lang,
    )


@dataclass(frozen=True, slots=True)
class LexicalVerdict:
    """Whether a passage shares a content word with the question: ``matched`` the question's
    content tokens found in it, of ``n_content``."""

    is_supported: bool
    matched: tuple[str, ...]
    n_content: int

    @property
    def detail(self) -> str:
        if not self.n_content:
            return "the question has no content word"
        if not self.matched:
            return f"none of the question's {self.n_content} content words is in the passage"
        return (f"{len(self.matched)}/{self.n_content} content words in the passage: "
                + " ".join(self.matched[:8]))


def check_lexical_support(query: str, passages: list[str]) -> LexicalVerdict:
    """Does any content word of ``query`` (the question as searched: Hindi typed in Latin
    letters already rewritten, :mod:`rag.romanized`) occur in one of ``passages`` (the passage
    the answer is read from and the retrieved passage it stands for, when that is its
    translation)? A word matches as in answer selection (:func:`rag.text.token_matches`: equal,
    or 4+ characters and one a prefix of the other). Content words are the tokens of three
    characters or more, or numbers of two digits or more, that are no language's stopword
    (:func:`rag.text.content_tokens`): a letter or two is no word to rest an answer on ("s" of
    "it's", "c" of "°C" and "ba" of "(BA)" matched random text in 3 of 20,000 strings,
    scripts/fuzz_text.py).

    No threshold is fitted here: a passage that shares no word with the question is never
    shown as its answer, whatever the cosine and the gate say (issue 34: 21 characters of
    random Gujarati, Devanagari, CJK, Telugu and Latin were answered with a Telugu extract the
    gate let through, with no word of the input in the passage; docs/benchmarks.md, "Figures
    behind the code's constants")."""
    asked = list(dict.fromkeys(t for t in content_tokens(query)
                               if len(t) >= 3 or (t.isdigit() and len(t) >= 2)))
    words = {t for text in passages for t in tokenize(text)}
    matched = tuple(t for t in asked if token_matches(t, words))
    return LexicalVerdict(bool(matched), matched, len(asked))


@dataclass(frozen=True, slots=True)
class GroundingVerdict:
    """``method`` is ``overlap``, ``similarity`` or ``none`` (failed both)."""

    is_grounded: bool
    overlap: float
    similarity: float | None
    method: str

    @property
    def detail(self) -> str:
        sim = "n/a" if self.similarity is None else f"{self.similarity:.3f}"
        return f"overlap {self.overlap:.3f}, similarity {sim} -> {self.method}"


def token_overlap(answer: str, sources: list[str]) -> float:
    """Share of the answer's content tokens found in the sources (0 for an empty answer)."""
    answer_tokens = content_tokens(answer)
    if not answer_tokens:
        return 0.0
    source_tokens = {t for s in sources for t in tokenize(s)}
    return sum(t in source_tokens for t in answer_tokens) / len(answer_tokens)


def check_grounding(
    answer: str,
    sources: list[str],
    settings: RagSettings,
    answer_vector: np.ndarray | None = None,
    source_vectors: np.ndarray | None = None,
) -> GroundingVerdict:
    """Token overlap >= ``grounding_overlap`` passes; else the best cosine between the answer's
    vector (float32 (dim,)) and the sources' vectors (float32 (n, dim)) >= ``grounding_similarity``
    passes; vectors are only needed when the overlap fails.
    """
    overlap = token_overlap(answer, sources)
    if overlap >= settings.grounding_overlap:
        return GroundingVerdict(True, overlap, None, "overlap")
    if answer_vector is None or source_vectors is None or not len(source_vectors):
        return GroundingVerdict(False, overlap, None, "none")
    similarity = float(np.max(source_vectors @ answer_vector))
    is_grounded = similarity >= settings.grounding_similarity
    return GroundingVerdict(
        is_grounded, overlap, similarity, "similarity" if is_grounded else "none"
    )
