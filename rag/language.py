"""Query language from the share of words in each Unicode script.

A character's script is the first word of its Unicode name (:func:`script_of`, the one rule the
input guard and the bot use too): Telugu → ``te``, Gujarati → ``gu``, Devanagari → ``hi``,
Latin letters → ``en``. Each word counts for the script of its first letter, a function word of that
language (``rag.text.STOPWORDS``: "the", "of", "की", "क्या", "છે", "ఎంత") twice, since the
grammar words name the language a sentence is built in; the script with the highest count
wins, a tie with Latin going to the Indic script (a tie between Indic scripts is not
broken: :func:`script_tie`). So an English question with an Indic place name ("what
is the population of અમદાવાદ?") stays English, and a Hindi question with English terms
("COVID vaccine के side effects क्या हैं") stays Hindi. Hindi typed in Latin letters is told
apart by its grammar words (:mod:`rag.romanized`). Words were chosen over letters because an Indic
word has fewer letters than the same word in Latin (its vowels are marks): by letters,
"iPhone 15 Pro Max की कीमत क्या है" would be English. ``tests/fixtures/mixed_script.tsv`` holds
the mixed inputs this rule was measured on (docs/questions.md: "Language of a question").
"""

from __future__ import annotations

import unicodedata

from rag.lexicon import HindiLexicon
from rag.romanized import is_romanized_hindi, to_devanagari
from rag.text import STOPWORDS, strip_fillers, tokenize
from rag.types import LANGUAGES, LanguageBasis

_SCRIPT_LANGUAGES = {"TELUGU": "te", "GUJARATI": "gu", "DEVANAGARI": "hi", "LATIN": "en"}
"""First word of a character's Unicode name -> the corpus language written in that script."""


def script_of(ch: str) -> str | None:
    """The corpus language whose script the one character ``ch`` is in, by the first word of
    its Unicode name: ``te``/``gu``/``hi`` for any Telugu, Gujarati or Devanagari character
    (letters, vowel signs, digits, danda), ``en`` for a Latin letter; None for anything else
    (ASCII digits, punctuation, emoji, a combining accent, Tamil, Cyrillic, unassigned code
    points)."""
    lang = _SCRIPT_LANGUAGES.get(unicodedata.name(ch, "").partition(" ")[0])
    return None if lang == "en" and not ch.isalpha() else lang


def detect_language(text: str) -> str:
    """The language most of ``text``'s words are written in (see :func:`dominant_language`);
    Latin letters are ``hi`` when they spell Hindi (:func:`rag.romanized.is_romanized_hindi`:
    "xbox 360 ki keemat kitni hai"), else ``en``; ``en`` when no word is in these scripts or
    Indic scripts tie (:func:`script_tie`: the pipeline refuses those)."""
    lang = dominant_language(text) or "en"
    return "hi" if lang == "en" and is_romanized_hindi(text) else lang


def dominant_language(text: str) -> str | None:
    """The language most of ``text``'s words are written in, a word counting for the script of
    its first letter (Latin for ``en``), twice when it is a function word of that language: an
    English answer with one Hindi word is ``en``; a Hindi or Gujarati one naming a product
    ("PlayStation 4 Pro ની કિંમત કેટલી છે?") stays Indic. A tie between one Indic script and
    Latin goes to the Indic script (a code-mixed question); a tie between two or more Indic
    scripts is not broken (:func:`script_tie`): None then, as when no word is in these
    scripts."""
    counts = script_counts(text)
    lang, n = max(counts.items(), key=lambda kv: kv[1])  # first of equals: Indic before en
    return lang if n > 0 and not _indic_tie(counts) else None


def script_counts(text: str) -> dict[str, int]:
    """Words of ``text`` per script's language (``te``, ``gu``, ``hi``, ``en``), a function word
    of that language counting twice (:func:`dominant_language`'s vote)."""
    counts = dict.fromkeys(("te", "gu", "hi", "en"), 0)
    for word in tokenize(text):
        lang = script_of(word[0])
        if lang is not None:
            counts[lang] += 2 if word in STOPWORDS[lang] else 1
    return counts


def _indic_tie(counts: dict[str, int]) -> tuple[str, ...]:
    """The languages sharing the top count when two or more of them are Indic; else ()."""
    top = max(counts.values())
    tied = tuple(lang for lang, n in counts.items() if n == top)
    return tied if top > 0 and sum(lang != "en" for lang in tied) >= 2 else ()


def script_tie(text: str) -> tuple[str, ...]:
    """The languages whose scripts tie for most of ``text``'s words when two or more of them
    are Indic scripts (e.g. ``("te", "gu", "hi", "en")`` for 21 characters with one word each
    of Telugu, Gujarati, Devanagari and Latin), else ``()``. No script says which language
    such text is in, so it is not broken towards one: the pipeline refuses it unless the
    language was given (issue 34: a four-way tie broken towards Telugu was answered from a
    Telugu passage sharing no word with it)."""
    return _indic_tie(script_counts(text))


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


def script_language(text: str) -> str | None:
    """The corpus language ``text`` is written in, judged by its letters: ``te``/``gu``/``hi``
    when it has Telugu, Gujarati or Devanagari letters (the most wins, as in
    :func:`detect_language`), ``en`` when at least half its letters are Latin, else None: no
    letters (emoji, digits) or mostly another script (Tamil, Chinese)."""
    indic = detect_language(text)
    if indic != "en":
        return indic
    letters = [ch for ch in text if ch.isalpha()]
    n_latin = sum(script_of(ch) == "en" for ch in letters)
    return "en" if letters and 2 * n_latin >= len(letters) else None


def read_language(text: str, lang: str | None = None, hint_lang: str | None = None, *,
                  lexicon: HindiLexicon | None = None, leading: bool = True) -> LanguageBasis:
    """The :class:`~rag.types.LanguageBasis` of the question ``text``: ``lang`` when given
    (explicit), else ``hint_lang`` (speech-to-text's), else the script's
    (:func:`detect_language`); Hindi in Latin letters is read in Devanagari
    (:func:`rag.romanized.to_devanagari`: the hand list, then ``lexicon``, the corpus lexicon
    shipped in ``rag/hindi_lexicon.json`` when None), then spoken fillers are removed
    (:func:`rag.text.strip_fillers`; ``leading``: also those that only open a question).
    ``HindiLexicon()`` and ``leading=False`` read it as before issue 42 (the measurement's
    baseline, scripts/measure_hindi.py).

    Raises:
        ValueError: the language is not one of :data:`LANGUAGES`.
    """
    tied: tuple[str, ...] = ()
    if lang is not None:
        query_lang, source = lang, "explicit"
    elif hint_lang is not None:
        query_lang, source = hint_lang, "speech-to-text"
    else:
        query_lang, source, tied = detect_language(text), "script", script_tie(text)
    if query_lang not in LANGUAGES:
        raise ValueError(f"language {query_lang!r} not in {LANGUAGES}")
    read_as = (to_devanagari(text, lexicon) if query_lang == "hi" and is_romanized_hindi(text)
               else "")
    spoken = strip_fillers(read_as or text, query_lang, leading)
    return LanguageBasis(query_lang, source, script_language(text), read_as,
                         spoken if spoken != text else "", spoken != (read_as or text), tied)
