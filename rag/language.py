"""Query language from the share of words in each Unicode script.

Telugu U+0C00–0C7F → ``te``, Gujarati U+0A80–0AFF → ``gu``, Devanagari U+0900–097F → ``hi``,
Latin → ``en``. Each word counts for the script of its first letter, a function word of that
language (``rag.text.STOPWORDS``: "the", "of", "की", "क्या", "છે", "ఎంత") twice, since the
grammar words name the language a sentence is built in; the script with the highest count
wins, ties going to the Indic script. So an English question with an Indic place name ("what
is the population of અમદાવાદ?") stays English, and a Hindi question with English terms
("COVID vaccine के side effects क्या हैं") stays Hindi. Words were chosen over letters because an Indic
word has fewer letters than the same word in Latin (its vowels are marks): by letters,
"iPhone 15 Pro Max की कीमत क्या है" would be English. ``tests/fixtures/mixed_script.tsv`` holds
the mixed inputs this rule was measured on (README: "Language of a question").
"""

from __future__ import annotations

import unicodedata

from rag.text import STOPWORDS, tokenize
from rag.types import LANGUAGES

_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0C00, 0x0C7F, "te"),
    (0x0A80, 0x0AFF, "gu"),
    (0x0900, 0x097F, "hi"),
)


def script_of(ch: str) -> str | None:
    """``te``/``gu``/``hi`` for a character of those scripts, ``en`` for a Latin letter, else
    None (digits, punctuation, other scripts)."""
    cp = ord(ch)
    for lo, hi, lang in _SCRIPT_RANGES:
        if lo <= cp <= hi:
            return lang
    return "en" if ch.isalpha() and unicodedata.name(ch, "").startswith("LATIN") else None


def detect_language(text: str) -> str:
    """The language most of ``text``'s words are written in (see :func:`dominant_language`);
    ``en`` when no word is in these scripts."""
    return dominant_language(text) or "en"


def dominant_language(text: str) -> str | None:
    """The language most of ``text``'s words are written in, a word counting for the script of
    its first letter (Latin for ``en``), twice when it is a function word of that language: an
    English answer with one Hindi word is ``en``; a Hindi or Gujarati one naming a product
    ("PlayStation 4 Pro ની કિંમત કેટલી છે?") stays Indic. Ties go to the Indic script; None when
    no word is in these scripts."""
    counts = dict.fromkeys(("te", "gu", "hi", "en"), 0)
    for word in tokenize(text):
        lang = script_of(word[0])
        if lang is not None:
            counts[lang] += 2 if word in STOPWORDS[lang] else 1
    lang, n = max(counts.items(), key=lambda kv: kv[1])  # first of equals: Indic before en
    return lang if n > 0 else None


def normalise_language(code: str | None) -> str | None:
    """Map a language code such as Sarvam's ``hi-IN`` or ``en-IN`` to ``hi``/``en``.

    Returns None for None, ``""``, ``auto`` or ``unknown``.

    Raises:
        ValueError: for a language the corpus does not cover (e.g. ``ta-IN``).
    """
    if code is None:
        return None
    short = code.strip().lower().split("-")[0].split("_")[0]
    if short in {"", "auto", "unknown"}:
        return None
    if short not in LANGUAGES:
        raise ValueError(f"unsupported language {code!r}: expected one of {', '.join(LANGUAGES)}")
    return short
