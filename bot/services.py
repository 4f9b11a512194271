"""What the bot's service functions need (:class:`Services`) and the plain data they exchange.

The service functions (``bot.questions``, ``bot.commands``) take these, never Telegram objects,
so the PTB handlers and the console run the same logic.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bot.ratelimit import RateLimiter
from bot.repeats import RepeatFilter
from bot.settings import Settings
from bot.voice_cache import VoiceCache
from clients.openrouter import OpenRouterClient
from clients.stt import SarvamSTT
from clients.tts import SarvamTTS
from rag.answering import Answerer
from rag.language import detect_language, normalise_language, script_of
from rag.pipeline import Pipeline
from storage.db import Database

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Services:
    """The bot's long-lived dependencies, opened once (``Services.open``) and closed once.

    ``answerer`` answers in either mode: extractively with ``pipeline`` in ``pipeline_pool``,
    off the event loop (``BOT_PIPELINE_THREADS`` threads), generatively with ``llm``;
    ``clock`` returns monotonic seconds (the rate limiter's time source);
    ``tts`` speaks replies, ``voice_pool`` encodes them (``BOT_VOICE_THREADS`` threads) and
    ``voice_cache`` keeps the voice notes made (``bot.voice_reply``).
    """

    settings: Settings
    pipeline: Pipeline
    db: Database
    stt: SarvamSTT
    llm: OpenRouterClient
    limiter: RateLimiter
    pipeline_pool: ThreadPoolExecutor
    tts: SarvamTTS | None = None
    voice_cache: VoiceCache = field(default_factory=lambda: VoiceCache(0))
    voice_pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="voice"))
    repeats: RepeatFilter = field(default_factory=RepeatFilter)
    clock: Callable[[], float] = time.monotonic
    answerer: Answerer = field(init=False)

    def __post_init__(self) -> None:
        self.answerer = Answerer(self.pipeline, self.llm,
                                 max_passages=self.settings.openrouter.max_passages,
                                 executor=self.pipeline_pool)

    @classmethod
    async def open(cls, settings: Settings, pipeline: Pipeline | None = None) -> Services:
        """Open the database and the HTTP clients; load the pipeline (encoder and index, warmed
        up, in a thread) unless one is given.

        Raises:
            RagError: the encoder or index cannot be loaded (message says how to fix it).
            DatabaseOpenError: the database file cannot be opened or migrated.
        """
        start = time.perf_counter()
        if pipeline is None:
            pipeline = await asyncio.to_thread(Pipeline.from_settings, settings.rag)  # warms up
        db = await Database.open(settings.bot.database_url or settings.bot.db_path)
        try:
            services = cls(
                settings=settings,
                pipeline=pipeline,
                db=db,
                stt=SarvamSTT(settings.sarvam),
                llm=OpenRouterClient(settings.openrouter),
                limiter=RateLimiter(settings.bot.rate_limit_n, settings.bot.rate_limit_window_s),
                pipeline_pool=ThreadPoolExecutor(settings.bot.pipeline_threads,
                                                 thread_name_prefix="pipeline"),
                repeats=RepeatFilter(settings.bot.repeat_window_s),
                tts=SarvamTTS(settings.sarvam, settings.tts),
                voice_cache=VoiceCache(int(settings.tts.cache_mb * 2**20)),
                voice_pool=ThreadPoolExecutor(settings.bot.voice_threads,
                                              thread_name_prefix="voice"),
            )
        except BaseException:
            await db.close()  # its worker thread would keep the process alive
            raise
        freeze_loaded_objects()
        log.info("services open encoder=%s index=%s db=%s took_ms=%.0f", pipeline.encoder.name,
                 settings.rag.index_dir, db.backend.location.display,
                 (time.perf_counter() - start) * 1e3)
        return services

    async def close(self) -> None:
        """Close the HTTP clients, the pipeline threads and the database (pending writes are
        already committed)."""
        self.pipeline_pool.shutdown(wait=True)
        self.voice_pool.shutdown(wait=True)
        await self.stt.aclose()
        if self.tts is not None:
            await self.tts.aclose()
        await self.llm.aclose()
        await self.db.close()


def freeze_loaded_objects() -> None:
    """Once per process: collect, then move every object alive now (the index's passages, the
    answer selector's IDF table, the encoder's tables: about 99,000 tracked objects with the
    sample index) out of the cyclic garbage collector's reach (``gc.freeze``), so its full
    collections stop walking them.

    Each full collection walked them on the event loop's thread: measured here with
    ``scripts/bench_bot.py`` (50 chats at once, 2 cores, load 0.6), gen-2 collections took
    65-81 ms and were the run's worst event-loop stall (81.8 ms); frozen, the worst stall was
    13.6-18.2 ms in two runs. Later calls do nothing (tests open many services in one process).
    """
    global _is_frozen
    if _is_frozen:
        return
    gc.collect()
    gc.freeze()
    _is_frozen = True
    log.info("gc frozen n_objects=%d", gc.get_freeze_count())


_is_frozen = False


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asked: ``chat_id`` (where to answer and whose settings apply), ``user_id``,
    ``message_id`` (what to reply to; None in the console), ``language_code``, the user's
    interface language as Telegram reports it (``hi``, ``en-US``; None if unknown), and
    ``sender_chat_id``, the chat a message was sent on behalf of (an anonymous group admin
    or a channel: ``user_id`` is then Telegram's shared placeholder account), and for a
    forwarded message ``forwarded_from``, where it came from (``user 42 at 2026-12-01T01:02:03Z``,
    ``hidden_user at ...``, ``chat -100123 at ...``, ``channel -100123 at ...``; None when it was
    not forwarded: ``bot.incoming.forward_origin``)."""

    chat_id: int
    user_id: int | None = None
    message_id: int | None = None
    language_code: str | None = None
    sender_chat_id: int | None = None
    forwarded_from: str | None = None

    @property
    def sender_id(self) -> int | None:
        """Whose rate limit a message counts against: the sender chat when there is one (all
        anonymous admins share one placeholder user), else the user."""
        return self.sender_chat_id if self.sender_chat_id is not None else self.user_id

    @property
    def interface_lang(self) -> str | None:
        """``language_code`` as a corpus language (``en``/``hi``/``gu``/``te``), else None."""
        try:
            return normalise_language(self.language_code)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class VoiceNote:
    """A voice note before download: ``file_size`` in bytes and ``duration_s`` in seconds as the
    sender advertised them (None if not given); ``fetch()`` downloads the encoded audio and
    raises ``bot.errors.VoiceDownloadError`` when the Bot API refuses (e.g. file too big)."""

    file_size: int | None
    duration_s: float | None
    fetch: Callable[[], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class Speech:
    """What a spoken reply says: plain ``text`` (no citations, ids or scores) in ``lang``
    (``en``/``hi``/``gu``/``te``)."""

    text: str
    lang: str


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send back: Telegram HTML messages in order (each ≤ 4096 characters, balanced
    tags), the id of the decision recorded for it (None for commands), and what to say in a
    voice note after them (None: no spoken reply; see ``bot.voice_reply``)."""

    messages: list[str] = field(default_factory=list)
    decision_id: int | None = None
    speech: Speech | None = None


def ui_language(chat_lang: str, asker: Asker, fallback: str | None = None) -> str:
    """Language for messages that are not an answer: the chat's ``/lang`` choice, else
    ``fallback`` (e.g. the script of what the user typed), else the user's Telegram interface
    language, else English."""
    if chat_lang != "auto":
        return chat_lang
    return fallback or asker.interface_lang or "en"


def script_language(text: str) -> str | None:
    """The corpus language ``text`` is written in, judged by its letters: ``te``/``gu``/``hi``
    when it has Telugu, Gujarati or Devanagari letters (the most wins, as in
    ``rag.language.detect_language``), ``en`` when at least half its letters are Latin, else
    None: no letters (emoji, digits) or mostly another script (Tamil, Chinese). Scripts are
    ``rag.language.script_of``'s."""
    indic = detect_language(text)
    if indic != "en":
        return indic
    letters = [ch for ch in text if ch.isalpha()]
    n_latin = sum(script_of(ch) == "en" for ch in letters)
    return "en" if letters and 2 * n_latin >= len(letters) else None
