"""Building the Latin <-> Devanagari lexicon of a corpus (``python -m ragtools build-lexicon``):
``rag/hindi_lexicon.json``, which :mod:`rag.lexicon` reads (what it holds and why: there).

- Hindi words: every Devanagari word of the Hindi passages, written in Latin letters by
  :func:`rag.romanized.to_latin` (also as typed without the nukta of ड़/ढ़ or a final nasal),
  under its :func:`rag.lexicon.spelling_key`; the commonest word wins a key.
- Loanwords: a Hindi word and an English word of its passage's English sibling (``hi-X-i`` /
  ``en-X-i``) pair when they share a consonant :func:`skeleton` (no other word of the sibling
  does) and their keys are alike; a pair is kept when seen often enough, and in at least half
  of the passage pairs with the Hindi word (the constants below).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from difflib import SequenceMatcher

from rag.lexicon import HindiLexicon, spelling_key
from rag.romanized import LEXICON as HAND_LIST
from rag.romanized import to_latin
from rag.text import STOPWORDS, tokenize
from rag.types import Passage

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

_VOWELS = re.compile(r"[aeiouy]+")

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

def build_lexicon(passages: Iterable[Passage], source: str = "") -> HindiLexicon:
    """The lexicon of ``passages``: the Hindi ones give :attr:`HindiLexicon.native` (each
    word's key from :func:`rag.romanized.to_latin`), Hindi and English siblings
    :attr:`HindiLexicon.loanwords` and :attr:`HindiLexicon.english` (see the module)."""
    by_id = {p.id: p for p in passages}
    counts: Counter[str] = Counter()
    for p in by_id.values():
        if p.lang == "hi":
            counts.update(w for w in tokenize(p.text) if _DEVANAGARI_WORD.fullmatch(w))
    plain = HindiLexicon()  # transliteration alone: not the loanwords of an earlier lexicon
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
    hand = set(HAND_LIST.values())
    for (en, hi), n in pairs.items():
        short = len(skeleton(english_key(en))) < MIN_SKELETON
        if n < (MIN_PAIRS_SHORT if short else 1 if sure[(en, hi)] else 2) or \
                matched[hi] < MIN_PAIRED_SHARE * paired_in[hi] or hi in hand:
            continue
        if en not in loanwords or (n, hi) > loanwords[en]:
            loanwords[en] = (n, hi)
        if hi not in english or (n, en) > english[hi]:
            english[hi] = (n, en)
    return HindiLexicon({k: w for k, (_, w) in sorted(best.items())},
               {k: w for k, (_, w) in sorted(loanwords.items())},
               {k: w for k, (_, w) in sorted(english.items())}, source)
