"""A deterministic fake encoder and a tiny index of the shared sample, for the fast tests.

Tests of commands, rendering, rate limits, storage, the inbox, the console and the front ends
need *a* pipeline that answers some questions and refuses others; they do not measure
retrieval. These fakes give them one in well under a second, with no model and no index cache.
Nothing here says anything about retrieval quality: tests that check a real answer from the
real corpus use the real encoder and the index of the whole sample (``tests/conftest.py``,
marked ``slow``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bot.settings import BotSettings, Settings, TelegramSettings
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from clients.tts import SarvamTTSSettings
from rag.corpus import read_passages
from rag.language import detect_language
from rag.pipeline import Pipeline, Prepared
from rag.settings import RagSettings
from rag.text import clean_query, content_tokens, tokenize
from rag.types import FollowUpReading, Passage, Result, Trace, Turn
from standins.sarvam import SarvamStandin
from standins.telegram import FakeTelegram

NGRAM = 3
"""Character n-grams (within a word, with ``<``/``>`` word edges) added to the word features, so
"costs" and "cost" or "कीमत" and "कीमतें" still share most of their weight."""
NGRAM_WEIGHT = 0.5
"""Weight of each character n-gram relative to a whole content word (weight 1)."""


class HashingEncoder:
    """Hashed bag of words and character n-grams: a stand-in for multilingual-e5-small.

    Contract (that of :class:`rag.encoders.Encoder`): ``encode_queries(texts)`` and
    ``encode_passages(texts)`` return float32 arrays of shape ``(len(texts), dim)``, each row
    L2-normalised, so a dot product is a cosine in [-1, 1]. Deterministic across processes and
    machines (CRC-32 of UTF-8 features, never Python's salted ``hash``). Queries and passages are
    encoded alike (no E5 prefixes).

    Features of a text: its content words (:func:`rag.text.content_tokens`, stopwords of the four
    languages removed; all words when only stopwords remain) with weight 1, and their character
    trigrams with weight :data:`NGRAM_WEIGHT`, each hashed into one of ``dim`` buckets with a
    hashed sign. A text with no word at all (punctuation only) gets a fixed unit vector.

    Scores it gives on the fixture index (:func:`fixture_passages`): a question sharing its
    content words with passages scores 0.29-0.69 at the top, an unrelated one 0.11-0.18 (common
    trigrams such as "<th" collide), so :data:`FAKE_FLOOR` lies between them.
    Words of different scripts share no features, so an English question scores ~0 against a
    Hindi passage. It measures nothing about retrieval quality.
    """

    name = "fake-hashing-v1"
    variant = "fake"
    text_scheme = {"query_prefix": "", "passage_prefix": "", "folded": "tokens"}
    """No prefixes; texts are read as :func:`rag.text.tokenize` reads them."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(texts)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Words per text plus 2 (the real encoders count ``<s>`` and ``</s>``)."""
        return [len(tokenize(t)) + 2 for t in texts]

    def _encode(self, texts: Iterable[str]) -> np.ndarray:
        rows = [self._vector(t) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def _vector(self, text: str) -> np.ndarray:
        out = np.zeros(self.dim, dtype=np.float32)
        words = content_tokens(text) or tokenize(text)
        for word in words:
            self._add(out, "w:" + word, 1.0)
            edged = f"<{word}>"
            for i in range(len(edged) - NGRAM + 1):
                self._add(out, "c:" + edged[i:i + NGRAM], NGRAM_WEIGHT)
        norm = float(np.linalg.norm(out))
        if norm == 0.0:
            out[0] = 1.0
            return out
        return out / norm

    def _add(self, out: np.ndarray, feature: str, weight: float) -> None:
        h = zlib.crc32(feature.encode("utf-8"))
        out[h % self.dim] += weight if (h >> 31) & 1 else -weight


FIXTURE_QUERY_IDS = (331047, 59804, 168868, 227261, 55665, 90836)
"""Query ids of the shared sample whose passages make the fixture index: the Xbox 360 price
(331047: en, hi), calories in cucumbers (59804: en, hi), medical marijuana (168868) and pollution
and population (227261) in all four languages, and two more four-language groups (55665, 90836)
as distractors. 200 passages; the bot tests' questions ask about the first four."""


def fixture_passages(corpus_path: Path) -> list[Passage]:
    """The passages of :data:`FIXTURE_QUERY_IDS` from the shared sample at ``corpus_path``, in
    corpus order (read from there, never copied into the repository)."""
    wanted = set(FIXTURE_QUERY_IDS)
    return [p for p in read_passages(corpus_path) if p.query_id in wanted]


FAKE_FLOOR = 0.25
"""Relevance floor of every language for :class:`HashingEncoder` scores on the fixture index:
above the unrelated questions' top scores (0.11-0.18) and below the related ones' (0.29-0.69,
measured on the questions the bot tests ask), so which question is answered does not hang on a
hair. The real floors (0.84-0.85) are cosines of multilingual-e5-small and mean nothing here."""


def fake_rag_settings(index_dir: Path) -> RagSettings:
    """Core settings for a pipeline over the fixture index built with :class:`HashingEncoder`:
    :data:`FAKE_FLOOR` for every language and the answerability gate off (its model is fitted on
    multilingual-e5-small scores, so on these it would refuse or pass by accident); the floor
    alone decides, which keeps the fake pipeline's answers predictable. Other fields keep their
    production defaults."""
    return RagSettings(floor_en=FAKE_FLOOR, floor_hi=FAKE_FLOOR, floor_gu=FAKE_FLOOR,
                       floor_te=FAKE_FLOOR, use_gate=False, index_dir=index_dir)


FOLLOWUP_MAX_WORDS = 6
"""Longest message (in :func:`rag.text.tokenize` words) the fake reads as a follow-up: "and a
large one?" (4), "और बड़े वाले में?" (4); a longer message is taken as a question of its own."""
FOLLOWUP_MARKERS: dict[str, frozenset[str]] = {
    "en": frozenset("and also it its that this those these them they one ones what about how "
                    "same".split()),
    "hi": frozenset("और भी उस उसका उसकी उसके उससे उसमें इस इसका इसकी इसके इससे इसमें वो वह वाले "
                    "वाली वाला aur bhi uska uski uske usse iska iski iske isse wala wali wale "
                    "ka ki ke".split()),
}
"""Words that make a short message lean on the one before (a pronoun, "and", an ellipsis's
"one"/"वाले"), per language; the fake reads follow-ups in English and Hindi only."""


def read_followup(message: str, after: Turn | str, lang: str | None = None) -> FollowUpReading:
    """The fake pipeline's follow-up reading (the real one is the lead's, in ``rag/``; issue
    44): ``message`` leans on ``after`` when it has at most :data:`FOLLOWUP_MAX_WORDS` words,
    one of them a marker of :data:`FOLLOWUP_MARKERS` in its language (``lang``, else its
    script's), that language being the previous turn's (when known); it is then searched as the
    previous question's content words followed by its own, duplicates dropped ("how many
    calories in a small cucumber" + "and a large one?" → "calories small cucumber large").
    Deterministic; it measures nothing about real follow-ups."""
    turn = Turn(after) if isinstance(after, str) else after
    words = tokenize(message)
    msg_lang = lang or detect_language(message)
    if turn.lang and msg_lang != turn.lang:
        return FollowUpReading(False, detail=f"alone: asked in {msg_lang}, previous turn in "
                                             f"{turn.lang}")
    if len(words) > FOLLOWUP_MAX_WORDS:
        return FollowUpReading(False, detail=f"alone: {len(words)} words > "
                                             f"{FOLLOWUP_MAX_WORDS}")
    markers = [w for w in words if w in FOLLOWUP_MARKERS.get(msg_lang, frozenset())]
    topic = content_tokens(turn.question)
    if not markers or not topic:
        why = "no follow-up marker" if not markers else "previous question has no content word"
        return FollowUpReading(False, detail=f"alone: {why}")
    searched = " ".join(dict.fromkeys(topic + content_tokens(message)))
    return FollowUpReading(True, searched, f"follow-up: {len(words)} words, marker "
                                           f"{markers[0]!r}; previous question's words added")


class FollowUpPipeline(Pipeline):
    """The fake pipeline with an honest ``after`` (issue 44's contract: ``Pipeline.ask(query,
    lang, hint_lang, after=previous)``; the real reading is the lead's): :func:`read_followup`
    decides, recorded as a ``followup`` stage first in the trace; a follow-up is searched as
    its reading, the result keeping the message as ``query`` and the reading as ``searched``;
    ``Result.followup`` is set whenever ``after`` is given. :meth:`prepare` takes ``after`` too
    (generative mode)."""

    def ask(self, query: str, lang: str | None = None, hint_lang: str | None = None,
            after: Turn | str | None = None) -> Result:
        if after is None:
            return super().ask(query, lang, hint_lang)
        trace = Trace()
        try:
            prepared = self.prepare(query, lang, hint_lang, trace, after=after)
            if isinstance(prepared, Result):
                return prepared
            return self.answer_extractive(prepared)
        except Exception as exc:
            return self.error_result(exc, query, lang or hint_lang, trace)

    def prepare(self, query: str, lang: str | None, hint_lang: str | None, trace: Trace,
                after: Turn | str | None = None) -> Prepared | Result:
        if after is None:
            return super().prepare(query, lang, hint_lang, trace)
        with trace.timed("followup") as stage:
            reading = read_followup(query, after, lang or hint_lang)
            stage.decision = "used" if reading.is_followup else "alone"
            stage.detail = reading.detail + (f": {reading.searched}" if reading.searched else "")
        prepared = super().prepare(reading.searched or query, lang, hint_lang, trace)
        asked = clean_query(query)
        if isinstance(prepared, Result):
            if reading.is_followup:
                prepared.searched = prepared.searched or prepared.query
                prepared.query = asked
            prepared.followup = reading
            return prepared
        if reading.is_followup:
            prepared.asked = asked
        prepared.followup = reading
        return prepared


def chat_settings(rag: RagSettings, db_path: Path, sarvam: SarvamStandin,
                  tg: FakeTelegram | None = None) -> Settings:
    """Settings for a front end over ``rag`` answering into ``db_path`` (SQLite), speech through
    the ``sarvam`` stand-in (short timeouts and back-offs), Telegram through ``tg`` when given,
    no rate limit; tests ``replace`` sections as they need."""
    telegram = (TelegramSettings(token=tg.token, api_base=tg.base_url,
                                 file_base=tg.base_file_url, poll_timeout_s=1)
                if tg is not None else TelegramSettings())
    return Settings(
        rag=rag,
        sarvam=SarvamSettings(api_key="test-key", base_url=sarvam.base_url, timeout_s=5.0,
                              max_attempts=2, backoff_base_s=0.01),
        openrouter=OpenRouterSettings(),
        telegram=telegram,
        bot=BotSettings(db_path=db_path, rate_limit_n=0),
        tts=SarvamTTSSettings(backoff_base_s=0.01),
    )
