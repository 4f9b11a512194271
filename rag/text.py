"""Indic-aware tokenisation and sentence splitting.

Python's ``\\w`` does not match Indic combining marks (matras, viramas: Unicode categories
Mn/Mc), so ``re.findall(r"\\w+", "किताब")`` splits a word apart. Here a token is a run of
letters, digits and combining marks. Sentences end at ``.``, ``?``, ``!``, the danda ``।``
and the double danda ``॥``.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable

# Letters, digits and the Devanagari/Gujarati/Telugu blocks, except the dandas U+0964/U+0965.
_WORD_CHARS = r"\w\u0900-\u0963\u0966-\u097F\u0A80-\u0AFF\u0C00-\u0C7F"
_TOKEN = re.compile(
    rf"[^\W_][{_WORD_CHARS}]*|[\u0900-\u0963\u0966-\u097F\u0A80-\u0AFF\u0C00-\u0C7F]+"
)
_SENTENCE_END = re.compile(r"(?<=[.?!।॥])\s+|(?<=[।॥])")

# Fillers and discourse words of spoken questions as speech-to-text writes them (issue 22: "umm
# so how much", "तो ज़रा बताओ", "અમ્મ ... જરા કહો", "అంటే ... చెప్పండి"), from the spoken-style
# training questions (eval/training); never words that can be the content asked about ("mean",
# "well", "मतलब" meaning, "अच्छा" good, "वो" that).
FILLERS: dict[str, frozenset[str]] = {
    "en": frozenset("umm um uh uhh hmm er erm ah okay ok actually basically so like just please "
                    "tell wanted wondering know".split()),
    "hi": frozenset("अम्म उम्म अं हम्म तो ज़रा जरा बताओ बताइए यार भई हाँ".split()),
    "gu": frozenset("અમ્મ ઉમ્મ હમ્મ તો જરા કહો કહેજો એટલે હા".split()),
    "te": frozenset("అమ్మ్ ఉమ్మ్ అంటే ఇంక చెప్పండి చెప్పు అసలు కొంచెం".split()),
}

LEADING_FILLERS: dict[str, frozenset[str]] = {
    "hi": frozenset("अच्छा मतलब हां".split()),
}
"""Words that open a spoken question as discourse markers but are content elsewhere ("अच्छा"
good, "मतलब" meaning): removed only from the question's start, with any :data:`FILLERS` among
them ("अच्छा तो ये कैल वाला चूना...", "मतलब घर पे मासा..."). From the first words of the Hindi
spoken-style training questions (eval/training: "अच्छा" opens 162 of the 412, "मतलब" 27; "हां"
is "हाँ", a filler, without its candrabindu). What it changes: docs/benchmarks.md, "Hindi found
as people ask it"."""

# Function words that carry no content, per language (short, hand-checked lists: the commonest
# question and glue words of MS MARCO queries and their MSMARCO-XI translations), plus FILLERS.
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "a an the is are was were be been being of in on at to for from by with and or as it its "
        "this that these those what which who whom whose when where why how do does did can could "
        "will would should much many long there their they them he she his her i you your we our "
        "me my not no yes if than then so also about into over under per".split()
    ),
    "hi": frozenset(
        "का की के है हैं था थी थे में से को पर और या एक यह वह ये वे क्या कौन कब कहाँ कहां क्यों "
        "कैसे कितना कितनी कितने होता होती होते हो जो तो भी ही लिए किस किसी कोई नहीं".split()
    ),
    "gu": frozenset(
        "છે છો હતું હતી હતા અને અથવા એક આ તે શું કોણ ક્યારે ક્યાં કેમ કેવી કેટલું કેટલા કેટલી માં "
        "નો ની નું ના ને થી પર માટે પણ જ કોઈ નથી".split()
    ),
    "te": frozenset(
        "ఒక ఈ ఆ ఏమిటి ఎవరు ఎప్పుడు ఎక్కడ ఎందుకు ఎలా ఎంత ఎన్ని మరియు లేదా కూడా కోసం లో నుండి "
        "యొక్క ఉంది ఉన్నాయి అది ఇది కాదు".split()
    ),
}
STOPWORDS = {lang: words | FILLERS[lang] for lang, words in STOPWORDS.items()}


_INVISIBLE_BREAKS = frozenset("\u200b\u2060\ufeff")

NATIVE_DIGIT_ZEROS: tuple[int, ...] = (0x0966, 0x0AE6, 0x0C66)
"""Code points of the digit zero in Devanagari (०), Gujarati (૦) and Telugu (౦); each script's
ten digits follow in order (Unicode blocks U+0966-096F, U+0AE6-0AEF, U+0C66-0C6F)."""
_ASCII_DIGITS = str.maketrans({chr(zero + i): str(i) for zero in NATIVE_DIGIT_ZEROS
                               for i in range(10)})
_JOINERS = "\u200c\u200d"  # ZWNJ, ZWJ: they choose a glyph's shape, never end a word
_TOKEN_FOLD = _ASCII_DIGITS | str.maketrans("", "", _JOINERS)
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Arabic letter mark, LRM/RLM, the embeddings and overrides (LRE, RLE, PDF, LRO, RLO) and the
isolates (LRI, RLI, FSI, PDI): they order text for display and carry no letter (Unicode Bidi
Algorithm, UAX #9)."""
_EMBED_FOLD = str.maketrans("", "", _JOINERS + BIDI_CONTROLS)
# "query: " / "passage: " typed (or pasted) by a user: the encoder adds its own E5 prefix
_E5_PREFIX = re.compile(r"^(?:(?:query|passage)\s*:\s*)+", re.IGNORECASE)


def clean_text(text: str, nfkc: bool = True) -> str:
    """``text`` as storable, displayable text: control characters (Unicode Cc, e.g. NUL, ESC),
    lone surrogates (Cs, from undecodable bytes or a JSON ``"\\ud800"``) and invisible word
    breaks (zero-width space, word joiner, BOM: copy-paste debris) become spaces, and whitespace
    runs fold to one space. Other format characters (Cf) stay: ZWJ/ZWNJ shape Indic words.
    ``nfkc`` folds compatibility forms, so fullwidth or "bold" letters (ｘｂｏｘ, 𝐗𝐛𝐨𝐱) read as
    plain ones (also "²" as "2": off for text that quotes passages), else NFC."""
    kept = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cs") or ch in _INVISIBLE_BREAKS else ch
        for ch in text
    )
    return " ".join(unicodedata.normalize("NFKC" if nfkc else "NFC", kept).split())


def embedding_text(text: str) -> str:
    """``text`` as the encoders embed it (queries and passages alike, :mod:`rag.encoders`): NFC,
    without ZWJ/ZWNJ (they choose a glyph's shape; :func:`tokenize` drops them too) and without
    bidi controls (:data:`BIDI_CONTROLS`). The encoder's tokenizer reads each of them as a word
    break ("કિલો\u200cગ્રામ" -> "▁કિ લો ▁ ગ્રા મ", "ab\u200fcd" -> "▁ab ▁cd"), so a ZWNJ
    typed inside a word moved the top cosine under the floor (issue 34; the figures:
    docs/benchmarks.md, "Figures behind the code's constants")."""
    return unicodedata.normalize("NFC", text).translate(_EMBED_FOLD)


def ascii_digits(text: str) -> str:
    """``text`` with Devanagari, Gujarati and Telugu digits as ASCII ones: "१०००" → "1000"."""
    return text.translate(_ASCII_DIGITS)


def clean_query(text: str) -> str:
    """A user's question as the pipeline reads it: :func:`clean_text`, then any leading
    ``query:``/``passage:`` (E5's prefixes, which the encoder adds itself) removed, and native
    digits as ASCII ones, so "૧૦૦૦" matches and embeds like the "1000" of a passage."""
    return ascii_digits(_E5_PREFIX.sub("", clean_text(text)))


_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")
"""An HTML or XML tag, opening, closing or empty (``<b>``, ``</b>``, ``<br/>``, ``<a href=…>``)."""
_MARKUP = re.compile(r"(?<![\w*_~`])[*_~`]{1,3}(?=\S)|(?<=\S)[*_~`]{1,3}(?![\w*_~`])")
"""Markdown emphasis and code marks at a word's edge (``*bold*``, ``__x__``, ```code```,
``~~x~~``), not inside a word (``snake_case``)."""
_PUNCT_RUN = re.compile(r"([?!.,;:।॥…])[?!.,;:।॥…\s]*(?=[?!.,;:।॥…])")
_TRAILING = re.compile(r"[\s?!.,;:।॥…\-~'\"“”‘’]+$")


def undecorated(text: str) -> str:
    """``text`` without what decorates a question and says nothing of what is asked, as the
    encoder, BM25, the readers and the gate read it (the reply and the log keep the user's
    text): HTML and XML tags and entities, Markdown emphasis, emoji and other pictographs
    (Unicode So, skin tones, keycaps, variation selectors, and the ZWJ joining them; a ZWJ
    inside an Indic word stays), runs of punctuation (``?!?!`` → ``?``) and the punctuation a
    question ends with; ``text`` itself when nothing else would be left."""
    plain = _TAG.sub(" ", html.unescape(text))
    kept: list[str] = []
    for ch in plain:
        if ch in "\ufe0e\ufe0f":
            continue  # a variation selector: how the sign before it is drawn
        if unicodedata.category(ch) == "So" or ch == "\u20e3" or 0x1F3FB <= ord(ch) <= 0x1F3FF:
            if kept and (kept[-1] == "\u200d" or (ch == "\u20e3" and kept[-1] in "0123456789#*")):
                kept.pop()  # the ZWJ inside an emoji sequence; a keycap's digit ("1️⃣")
            kept.append(" ")
        elif ch == "\u200d" and (not kept or not kept[-1].strip()):
            continue  # a ZWJ after an emoji (or nothing): the emoji's, not a word's
        else:
            kept.append(ch)
    plain = _MARKUP.sub("", "".join(kept))
    plain = _TRAILING.sub("", _PUNCT_RUN.sub(r"\1", " ".join(plain.split())))
    return plain or text


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; Indic words keep their matras and viramas intact, ZWJ/ZWNJ
    inside a word neither split it nor stay in the token, and native digits read as ASCII
    (``tokenize("क्‍या १०००") == ["क्या", "1000"]``)."""
    text = unicodedata.normalize("NFC", text).translate(_TOKEN_FOLD)
    return [t.lower() for t in _TOKEN.findall(text)]


def content_tokens(text: str, lang: str | None = None) -> list[str]:
    """Tokens minus the stopwords of every supported language (or of ``lang`` only)."""
    stops = STOPWORDS.get(lang, frozenset()) if lang else frozenset().union(*STOPWORDS.values())
    return [t for t in tokenize(text) if t not in stops]


def strip_fillers(text: str, lang: str, leading: bool = True) -> str:
    """``text`` without the whitespace-separated words that are :data:`FILLERS` of ``lang``
    (compared lower-cased, without surrounding punctuation) and, with ``leading``, without the
    :data:`LEADING_FILLERS` that open it; ``text`` itself when nothing else would be left. On
    the answerable spoken-style training questions (the list was drawn from them, so
    in-sample) the answer passage reached the top 5 and the top cosine cleared the floor more
    often with them removed before embedding (docs/benchmarks.md, "Figures behind the code's
    constants")."""
    fillers = FILLERS.get(lang, frozenset())
    words = text.split()
    if leading:
        opening = fillers | LEADING_FILLERS.get(lang, frozenset())
        start = 0
        while start < len(words) and words[start].lower().strip(",.!?;:…-") in opening:
            start += 1
        words = words[start:]
    kept = [w for w in words if w.lower().strip(",.!?;:…-") not in fillers]
    return " ".join(kept) if kept else text


def split_sentences(text: str) -> list[str]:
    """Split on sentence-final punctuation including the danda; drops empty pieces."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s and s.strip()]


def token_matches(query_token: str, words: set[str]) -> bool:
    """``query_token`` is in ``words``, or (4+ characters) one starts with the other, so "cost" and
    "costs" or "कीमत" and "कीमतें" match."""
    if query_token in words:
        return True
    if len(query_token) < 4:
        return False
    return any(
        len(w) >= 4 and (w.startswith(query_token) or query_token.startswith(w)) for w in words
    )


class TokenMatcher:
    """:func:`token_matches` for one question's tokens against many sets of words. Which of
    the question's tokens a word matches is worked out once per distinct word and kept, so a set
    of n words costs n lookups instead of n x (question tokens) prefix tests: answer selection
    tests every sentence of five passages several times over (scripts/bench_latency.py,
    select_answer stage). ``t in matcher.matched(words)`` equals ``token_matches(t, words)`` for
    every token ``t`` of the question."""

    def __init__(self, query_tokens: Iterable[str]) -> None:
        self.tokens = frozenset(query_tokens)
        self._long = [t for t in self.tokens if len(t) >= 4]
        self._by_word: dict[str, frozenset[str]] = {}

    def of_word(self, word: str) -> frozenset[str]:
        """The question's tokens that ``word`` matches (empty: none)."""
        found = self._by_word.get(word)
        if found is None:
            hits = {word} if word in self.tokens else set()
            if len(word) >= 4:
                hits.update(t for t in self._long if word.startswith(t) or t.startswith(word))
            found = self._by_word[word] = frozenset(hits)
        return found

    def matched(self, words: Iterable[str]) -> set[str]:
        """The question's tokens matched by any of ``words``."""
        out: set[str] = set()
        for word in words:
            out.update(self.of_word(word))
        return out


def coverage(query_tokens: set[str], text: str) -> float:
    """Share of ``query_tokens`` matched in ``text`` (0–1); 0 when there are no query tokens."""
    if not query_tokens:
        return 0.0
    words = set(tokenize(text))
    return sum(token_matches(t, words) for t in query_tokens) / len(query_tokens)


EXCERPT_CHARS = 200
"""Longest passage excerpt shown with a citation, in characters."""


def excerpt(text: str, max_chars: int = EXCERPT_CHARS) -> str:
    """``text`` with whitespace folded, cut at a word boundary to at most ``max_chars``
    characters plus an ellipsis when it was longer."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    if space >= max_chars * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"
