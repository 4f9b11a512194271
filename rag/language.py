"""Query language from Unicode script.

Telugu U+0C00–0C7F → ``te``, Gujarati U+0A80–0AFF → ``gu``, Devanagari U+0900–097F → ``hi``,
anything else → ``en``. The script with the most letters wins, so a Hindi question with an
English brand name ("Xbox 360 की कीमत") is still Hindi.
"""

from __future__ import annotations

import unicodedata

from rag.text import tokenize
from rag.types import LANGUAGES

_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0C00, 0x0C7F, "te"),
    (0x0A80, 0x0AFF, "gu"),
    (0x0900, 0x097F, "hi"),
)


def detect_language(text: str) -> str:
    """Return ``te``, ``gu`` or ``hi`` when that script has the most characters, else ``en``."""
    counts = dict.fromkeys(("te", "gu", "hi"), 0)
    for ch in text:
        cp = ord(ch)
        if cp < 0x0900:
            continue
        for lo, hi, lang in _SCRIPT_RANGES:
            if lo <= cp <= hi:
                counts[lang] += 1
                break
    lang, n = max(counts.items(), key=lambda kv: kv[1])
    return lang if n > 0 else "en"


def dominant_language(text: str) -> str | None:
    """The language most of ``text``'s words are written in, a word counting for the script of
    its first letter (Latin for ``en``). Unlike :func:`detect_language`, where any Indic letter
    wins, an English answer with one Hindi word is ``en``; a Hindi or Gujarati one naming a
    product ("PlayStation 4 Pro ની કિંમત કેટલી છે?") stays Indic. Ties go to the Indic script;
    None when no word is in these scripts."""
    counts = dict.fromkeys(("te", "gu", "hi", "en"), 0)
    for word in tokenize(text):
        lang = detect_language(word[0])
        if lang != "en":
            counts[lang] += 1
        elif unicodedata.name(word[0], "").startswith("LATIN"):
            counts["en"] += 1
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
