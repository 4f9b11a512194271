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
  same consonant skeleton (:func:`skeleton`). Read forwards, an English word of a code-mixed
  question also finds its Devanagari spelling in the Hindi passages; read backwards, a reply in
  Latin letters spells such a word as English does ("game", not "gem").

The lexicon is a fitted file like ``rag/fusion.json``: ``rag/hindi_lexicon.json``, built from a
corpus (``python -m ragtools build-lexicon``, default the shared sample; ~4 s) and read once, on
first use (~0.3 s). Nothing in it comes from the training or test questions. An index of another
corpus works with it (a word it lacks stays as typed); ``--corpus`` builds that corpus's own.
What it changes: docs/benchmarks.md, "Hindi found as people ask it".
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from rag.errors import ModelFileError
from rag.text import STOPWORDS, tokenize
from rag.types import Passage

LEXICON_PATH = Path(__file__).with_name("hindi_lexicon.json")
LEXICON_VERSION = 1
"""Format of ``hindi_lexicon.json`` and of the keys it was built with; a change means a rebuild
(``python -m ragtools build-lexicon``)."""
REBUILD = "python -m ragtools build-lexicon"

MIN_KEY_CHARS = 3
"""A typed word shorter than this is never looked up: two-letter Latin words ("ho", "me", "do")
are grammar words the hand lexicon (:data:`rag.romanized.LEXICON`) decides, or English."""
MIN_SKELETON = 3
"""Loanwords pair when their consonant skeleton has at least this many consonants; two
("jm": "game" and "गेम") only when seen in :data:`MIN_PAIRS_SHORT` passage pairs, as short
skeletons collide by chance more often ("गम", sorrow, with "gum")."""
MIN_PAIRS_SHORT = 3
"""Passage pairs a loanword pair of a two-consonant skeleton must be seen in."""
MIN_KEY_RATIO = 0.6
"""A loanword pair's keys (vowels included) must be this alike (difflib's ratio, 0-1), and
the pair seen in two passage pairs or more: "smokes" (smoks) and "समीक्षा" (samiksha) share
the skeleton "smks" but not their vowels (0.5); "game" and "गेम" (gam / gem) 0.67."""
SURE_KEY_RATIO = 0.8
"""Seen in one passage pair only, the keys must be this alike: "peeled" and "पील्ड" (piled /
pild) 0.89, where "part" and "प्रति" (part / prati) 0.67 is a coincidence."""
MIN_PAIRED_SHARE = 0.5
"""...and in at least this share of the passage pairs whose Hindi side has the Hindi word: a
loanword's English sibling nearly always has the English word ("गेम" / "game"), where a Hindi
word that matches an English one by chance does not ("में" men / "mean", "होता" hota /
"hot", in a handful of the thousands of passages with them). Hindi words of the hand lexicon
(:data:`rag.romanized.LEXICON`) are never loanwords ("नाम" is "naam", though "name" pairs
with it)."""

_DEVANAGARI_WORD = re.compile(r"[\u0900-\u0963\u0971-\u097f]+")
_LATIN_WORD = re.compile(r"[a-z]+")
_VOWELS = re.compile(r"[aeiouy]+")
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
and "chay" for चाय), aspiration dropped after
b/d/g/j/k/t ("bhi" and "bi", "kharch" and "karch"), doubled letters once ("kimmat"/"kimat",
"accha"/"acha")."""


def spelling_key(latin: str) -> str:
    """The key of a Latin spelling of a Hindi word (lower-cased letters only) under which its
    variants meet: ``spelling_key("keemat") == spelling_key("kimmat") == "kimat"``."""
    key = "".join(_LATIN_WORD.findall(latin.lower()))
    for pattern, repl in _KEY_STEPS:
        key = pattern.sub(repl, key)
    return key


_ENGLISH_STEPS = (
    (re.compile(r"tion"), "shan"), (re.compile(r"c(?=[eiy])"), "s"),
    (re.compile(r"g(?=[eiy])"), "j"), (re.compile(r"y$"), "i"),
    (re.compile(r"^kn"), "n"), (re.compile(r"^wr"), "r"), (re.compile(r"gh"), ""),
    (re.compile(r"th"), "t"), (re.compile(r"ch(?=[rl])"), "k"), (re.compile(r"(?<=[a-z])e$"), ""),
)
"""English spellings moved towards how Hindi writes them, before :func:`spelling_key`:
"-tion" is "-शन", soft c is s and soft g j, a final y i, silent initial k/w and "gh" dropped,
"th" is त/थ, "chr"/"chl" is k ("chlorine"), a final silent e dropped."""


def english_key(word: str) -> str:
    """:func:`spelling_key` of an English word after :data:`_ENGLISH_STEPS`: "calorie" ->
    "kalori", "station" -> "stashan"."""
    word = word.lower()
    for pattern, repl in _ENGLISH_STEPS:
        word = pattern.sub(repl, word)
    return spelling_key(word)


def skeleton(key: str) -> str:
    """The consonants of a key (from :func:`spelling_key` or :func:`english_key`), vowels and
    "y" dropped, "h" after a consonant dropped, "sh" as "s", "j"/"g" as one: where a Devanagari
    spelling and the English word it transliterates agree ("गेम" gem / "game" -> "jm",
    "एनर्जी" enarji / "energy" -> "nrj")."""
    key = re.sub(r"(?<=[^aeiouy])h", "", key.replace("sh", "s")).replace("g", "j")
    return re.sub(r"([a-z])\1+", r"\1", _VOWELS.sub("", key))


_NUKTA_R = re.compile("([\u0921\u0922])\u093c")  # ड़ and ढ़ as NFC writes them
_FINAL_NASAL = re.compile(r"[\u0901\u0902]$")


def _typed_variants(word: str) -> set[str]:
    """Spellings of a Devanagari ``word`` as people also type it: ड़/ढ़ as d/dh ("padta" for
    पड़ता, which :func:`~rag.romanized.to_latin` writes "parta"), a final nasal left out
    ("gehu" for गेहूं)."""
    plain = _NUKTA_R.sub(r"\1", word)
    out = {plain, _FINAL_NASAL.sub("", word), _FINAL_NASAL.sub("", plain)}
    out.discard(word)
    return {w for w in out if w}


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

    @classmethod
    def build(cls, passages: Iterable[Passage], source: str = "") -> HindiLexicon:
        """The lexicon of ``passages``: the Hindi ones give :attr:`native` (each word's key from
        :func:`rag.romanized.to_latin`), Hindi and English siblings :attr:`loanwords`."""
        from rag.romanized import LEXICON as HAND_LEXICON
        from rag.romanized import to_latin

        by_id = {p.id: p for p in passages}
        counts: Counter[str] = Counter()
        for p in by_id.values():
            if p.lang == "hi":
                counts.update(w for w in tokenize(p.text) if _DEVANAGARI_WORD.fullmatch(w))
        plain = cls()  # transliteration alone: not the loanwords of an earlier lexicon
        latin = {w: to_latin(w, plain) for w in counts}
        best: dict[str, tuple[int, str]] = {}
        for word, n in counts.items():
            for spelt in {latin[word], *(to_latin(v, plain) for v in _typed_variants(word))}:
                key = spelling_key(spelt)
                if len(key) >= 2 and (key not in best or (n, word) > best[key]):
                    best[key] = (n, word)
        pairs: Counter[tuple[str, str]] = Counter()
        sure: dict[tuple[str, str], bool] = {}
        paired_in: Counter[str] = Counter()  # Hindi word -> passages with an English sibling
        english_stops = STOPWORDS["en"]
        for p in by_id.values():
            sibling = by_id.get(p.sibling_id("en")) if p.lang == "hi" else None
            if sibling is None:
                continue
            by_skeleton: dict[str, set[str]] = defaultdict(set)
            for w in set(tokenize(sibling.text)):
                if w.isascii() and w.isalpha() and len(w) >= 3 and w not in english_stops:
                    by_skeleton[skeleton(english_key(w))].add(w)
                    if w.endswith("s") and not w.endswith("ss"):  # "calories" / "कैलोरी"
                        by_skeleton[skeleton(english_key(w[:-1]))].add(w[:-1])
            hindi_words = set(tokenize(p.text)) & latin.keys()
            paired_in.update(hindi_words)
            for w in hindi_words:
                key = spelling_key(latin[w])
                found = by_skeleton.get(skeleton(key), ())
                if len(found) == 1 and len(skeleton(key)) >= MIN_SKELETON - 1:
                    en = next(iter(found))
                    ratio = SequenceMatcher(None, english_key(en), key).ratio()
                    if ratio >= MIN_KEY_RATIO:
                        pairs[(en, w)] += 1
                        sure[(en, w)] = ratio >= SURE_KEY_RATIO
        loanwords: dict[str, tuple[int, str]] = {}
        english: dict[str, tuple[int, str]] = {}
        matched: Counter[str] = Counter()
        for (_, hi), n in pairs.items():
            matched[hi] += n
        hand = set(HAND_LEXICON.values())
        for (en, hi), n in pairs.items():
            short = len(skeleton(english_key(en))) < MIN_SKELETON
            if n < (MIN_PAIRS_SHORT if short else 1 if sure[(en, hi)] else 2) or \
                    matched[hi] < MIN_PAIRED_SHARE * paired_in[hi] or hi in hand:
                continue
            if en not in loanwords or (n, hi) > loanwords[en]:
                loanwords[en] = (n, hi)
            if hi not in english or (n, en) > english[hi]:
                english[hi] = (n, en)
        return cls({k: w for k, (_, w) in sorted(best.items())},
                   {k: w for k, (_, w) in sorted(loanwords.items())},
                   {k: w for k, (_, w) in sorted(english.items())}, source)

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
