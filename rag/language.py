"""Query language from Unicode script.

Telugu U+0C00–0C7F → ``te``, Gujarati U+0A80–0AFF → ``gu``, Devanagari U+0900–097F → ``hi``,
anything else → ``en``. The script with the most letters wins, so a Hindi question with an
English brand name ("Xbox 360 की कीमत") is still Hindi.
"""

from __future__ import annotations

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
