"""The files the page loads besides itself: web fonts for Devanagari, Gujarati and Telugu, and
the favicon.

Fonts: Google's Noto Sans in the three scripts (SIL Open Font License 1.1), regular and bold,
as Debian's ``fonts-noto-core`` installs them (``scripts/install.sh``), served from
``BOT_WEB_FONTS_DIR`` (default ``/usr/share/fonts/truetype/noto``). The page's CSS
(:func:`font_faces`) declares each with its script's ``unicode-range``, so a page in one
script downloads only that script's font (~200 KB each, then cached for
``bot.web.app.FONT_CACHE_S``), and names them first in its font stack: the range leaves Latin
to the fonts after them, and Chromium draws Indic letters at weights 500-600 as empty boxes
when a system font that lacks them comes first (tests/test_web_browser.py found it). Regular
serves weights up to 549, bold from 550. Where the files are missing the server says so once
at start (``web_fonts missing=…``), leaves their ``@font-face`` out, and the page falls back
to the system's fonts named in its font stack (Nirmala UI, Kohinoor, Lohit, ...): on a machine
with none of them Indic letters show as empty boxes, which is what the web fonts are for.

The favicon is ``static/favicon.svg`` (the page's accent blue, a speech bubble with a question
mark), and ``static/favicon.ico`` for browsers that ask for that name: the same drawing at 32×32
and 16×16 (``scripts/make_favicon.py`` draws it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
"""The favicon's files."""
DEFAULT_FONTS_DIR = Path("/usr/share/fonts/truetype/noto")
"""Where Debian's ``fonts-noto-core`` puts its TrueType files."""


@dataclass(frozen=True, slots=True)
class WebFont:
    """One font file: the CSS ``family`` it is served as, the ``weight`` range it serves (CSS
    ``font-weight`` of ``@font-face``: ``"100 549"`` regular, ``"550 900"`` bold) and the
    ``unicode_range`` it covers (CSS syntax)."""

    file: str
    family: str
    weight: str
    unicode_range: str


# Unicode ranges: each script's block, its Vedic extensions where used, ZWNJ/ZWJ, the dotted
# circle (U+25CC, shown under a stray mark) and the rupee sign (U+20B9).
_DEVANAGARI = "U+0900-097F, U+1CD0-1CF9, U+200C-200D, U+20B9, U+25CC, U+A8E0-A8FF"
_GUJARATI = "U+0A80-0AFF, U+200C-200D, U+20B9, U+25CC"
_TELUGU = "U+0C00-0C7F, U+200C-200D, U+20B9, U+25CC"
WEB_FONTS: tuple[WebFont, ...] = tuple(
    WebFont(f"NotoSans{script}-{style}.ttf", f"VR Noto Sans {script}", weight, ranges)
    for script, ranges in (("Devanagari", _DEVANAGARI), ("Gujarati", _GUJARATI),
                           ("Telugu", _TELUGU))
    for style, weight in (("Regular", "100 549"), ("Bold", "550 900")))
"""The six files served (three scripts, regular and bold)."""
FONT_FAMILIES = tuple(dict.fromkeys(font.family for font in WEB_FONTS))
"""The served families, in the order the page's font stack names them."""


def available_fonts(fonts_dir: Path) -> tuple[WebFont, ...]:
    """The :data:`WEB_FONTS` present in ``fonts_dir``; logs the missing ones once
    (``web_fonts missing=…``), with the package that provides them."""
    present = tuple(f for f in WEB_FONTS if (fonts_dir / f.file).is_file())
    missing = [f.file for f in WEB_FONTS if f not in present]
    if missing:
        log.warning("web_fonts dir=%s missing=%s: Indic text falls back to the system's fonts "
                    "(install Debian's fonts-noto-core: scripts/install.sh)", fonts_dir,
                    ",".join(missing))
    else:
        log.info("web_fonts dir=%s n_files=%d", fonts_dir, len(present))
    return present


def font_faces(fonts: tuple[WebFont, ...]) -> str:
    """The page's ``@font-face`` rules for ``fonts`` (served under ``/fonts/``)."""
    # no local(): every browser draws the page with the same files
    return "\n".join(
        f"@font-face {{ font-family: \"{f.family}\"; font-weight: {f.weight}; "
        f"font-display: swap; src: url(\"/fonts/{f.file}\") "
        f"format(\"truetype\"); unicode-range: {f.unicode_range}; }}" for f in fonts)
