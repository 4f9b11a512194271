"""A Latin <-> Devanagari lexicon built from the corpus's own Hindi words (issue 42, item 2).

People type Hindi in Latin letters however they like ("keemat", "kimat", "kimmat" for कीमत),
with English words inside ("xbox", "calorie") that the Hindi passages spell in Devanagari
("एक्सबॉक्स", "कैलोरी"). No hand list reaches every word, so this lexicon is built from the
corpus itself:

- **Hindi words** (:attr:`HindiLexicon.native`): every Devanagari word of the Hindi passages,
  spelt in Latin letters as people type them in chat (:func:`rag.romanized.to_latin`, which
  transliterates with ``indic_transliteration``), then reduced to a :func:`spelling_key` that
  folds the usual variations (long vowels doubled or not, "w"/"v", "z"/"j", "f"/"ph", aspiration,
  doubled consonants). A typed word is read as the commonest corpus word with its key.
- **Loanwords** (:attr:`HindiLexicon.loanwords`): English words and the Devanagari spelling
  the machine translation gave them ("game" <-> "गेम", "peeled" <-> "पील्ड"), paired across
  each Hindi passage and its English sibling (``hi-X-i`` / ``en-X-i``) when both reduce to the
  same consonant skeleton (:mod:`ragtools.lexicon_build`). Read forwards, an English word of
  a Latin-letter question finds its Devanagari spelling in the Hindi passages; read backwards,
  a reply in Latin letters spells such a word as English does ("game", not "gem").

The lexicon is a fitted file like ``rag/fusion.json``: ``rag/hindi_lexicon.json``, built from a
corpus (``python -m ragtools build-lexicon``: :mod:`ragtools.lexicon_build`, default the shared
sample; ~4 s) and read once, on
first use (~0.3 s). Nothing in it comes from the training or test questions. An index of another
corpus works with it (a word it lacks stays as typed); ``--corpus`` builds that corpus's own.
What it changes: docs/benchmarks.md, "Hindi found as people ask it".
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rag.errors import ModelFileError

LEXICON_PATH = Path(__file__).with_name("hindi_lexicon.json")
LEXICON_VERSION = 1
"""Format of ``hindi_lexicon.json`` and of the keys it was built with; a change means a rebuild
(``python -m ragtools build-lexicon``)."""
REBUILD = "python -m ragtools build-lexicon"

MIN_KEY_CHARS = 3
"""A typed word shorter than this is never looked up: two-letter Latin words ("ho", "me", "do")
are grammar words the hand lexicon (:data:`rag.romanized.LEXICON`) decides, or English."""
_LATIN_WORD = re.compile(r"[a-z]+")
_KEY_STEPS = (
    (re.compile(r"ph"), "f"), (re.compile(r"w"), "v"), (re.compile(r"z"), "j"),
    (re.compile(r"q"), "k"), (re.compile(r"x"), "ks"), (re.compile(r"ck"), "k"),
    (re.compile(r"c(?!h)"), "k"), (re.compile(r"ee|ii|ey$"), "i"),
    (re.compile(r"oo|uu"), "u"), (re.compile(r"aa"), "a"), (re.compile(r"eh"), "ah"),
    (re.compile(r"(?<=a)y$"), "i"),
    (re.compile(r"(?<=[bdgjkt])h"), ""), (re.compile(r"chh"), "ch"),
    (re.compile(r"([a-z])\1+"), r"\1"),
)
"""Latin spellings of one Hindi sound folded to one: "ph"/"f" (फ), "w"/"v" (व), "z"/"j" (ज़
typed without its dot), "q"/"k", "ee"/"i" and "oo"/"u" (long vowels typed doubled or not),
"eh" as "ah" (the schwa before h, typed "kehte" and "kahte"), a final "ay" as "ai" ("chai"
and "chay" for चाय), aspiration dropped after b/d/g/j/k/t ("bhi" and "bi", "kharch" and
"karch"), doubled letters once ("kimmat"/"kimat", "accha"/"acha")."""


def spelling_key(latin: str) -> str:
    """The key of a Latin spelling of a Hindi word (lower-cased letters only) under which its
    variants meet: ``spelling_key("keemat") == spelling_key("kimmat") == "kimat"``."""
    key = "".join(_LATIN_WORD.findall(latin.lower()))
    for pattern, repl in _KEY_STEPS:
        key = pattern.sub(repl, key)
    return key


@dataclass
class HindiLexicon:
    """``native``: spelling key -> the corpus's commonest Devanagari word with that key;
    ``loanwords``: English word (lower case) -> its Devanagari spelling in the Hindi passages;
    ``english``: that Devanagari spelling -> the English word (the reverse, for replies)."""

    native: dict[str, str] = field(default_factory=dict)
    loanwords: dict[str, str] = field(default_factory=dict)
    english: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def devanagari(self, word: str) -> str | None:
        """The Devanagari word a Latin ``word`` stands for: an English loanword's spelling in
        the Hindi passages, else the Hindi word with its :func:`spelling_key`; None for words
        shorter than :data:`MIN_KEY_CHARS` or unknown."""
        lower = word.lower()
        if len(lower) < MIN_KEY_CHARS or not lower.isascii() or not lower.isalpha():
            return None
        return self.loanwords.get(lower) or self.native.get(spelling_key(lower))

    def latin(self, word: str) -> str | None:
        """The English spelling of a Devanagari loanword ("गेम" -> "game"), or None."""
        return self.english.get(word)

    def write(self, path: Path = LEXICON_PATH) -> None:
        """Write the lexicon (read back by :func:`load_lexicon`)."""
        data = {"version": LEXICON_VERSION, "source": self.source, "native": self.native,
                "loanwords": self.loanwords, "english": self.english}
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n",
                              encoding="utf-8")


_loaded: dict[Path, HindiLexicon] = {}
_lock = threading.Lock()


def load_lexicon(path: Path = LEXICON_PATH) -> HindiLexicon:
    """The lexicon at ``path``, read once per process.

    Raises:
        ModelFileError: missing, unreadable, or another format version (one line naming the
            rebuild command).
    """
    path = Path(path)
    with _lock:
        if path in _loaded:
            return _loaded[path]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != LEXICON_VERSION:
                raise ValueError(f"version {data.get('version')}, this code reads "
                                 f"{LEXICON_VERSION}")
            lexicon = HindiLexicon(dict(data["native"]), dict(data["loanwords"]),
                                   dict(data["english"]), str(data.get("source", "")))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError,
                AttributeError) as exc:
            raise ModelFileError(f"cannot read the Hindi lexicon {path} ({type(exc).__name__}: "
                                 f"{exc}): restore it from the repository or rebuild it with "
                                 f"`{REBUILD}`") from None
        _loaded[path] = lexicon
        return lexicon
