"""What the chat layer's service functions need: :class:`Services`, opened once per process.

The service functions (``bot.chat.questions``, ``bot.chat.commands``) take these and the plain
data of ``bot.chat.types``, never a channel's objects, so every front end runs the same logic.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bot.chat.policy import ChannelPolicy
from bot.chat.state import ChatState, InProcessState, open_state
from bot.settings import Settings
from clients.openrouter import OpenRouterClient
from clients.stt import SarvamSTT
from clients.tts import SarvamTTS
from rag.answering import Answerer
from rag.pipeline import Pipeline
from storage.db import Database

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Services:
    """The bot's long-lived dependencies, opened once (``Services.open``) and closed once.

    ``answerer`` answers in either mode: extractively with ``pipeline`` in ``pipeline_pool``,
    off the event loop (``BOT_PIPELINE_THREADS`` threads), generatively with ``llm``;
    ``clock`` returns monotonic seconds (a front end's own limits, e.g. the web page's new
    sessions), ``wall_clock`` Unix seconds (the age of a chat's conversation context,
    ``bot.chat.conversation``, stored in the database, so replicas and restarts agree on it;
    a test may fix either); ``channels`` holds each front end's
    :class:`~bot.chat.policy.ChannelPolicy` (allow-list, size limits); ``tts`` speaks replies
    and ``voice_pool`` encodes them (``BOT_VOICE_THREADS`` threads; ``bot.chat.voice_reply``).
    ``state`` is the rate limit,
    the repeat window and the spoken-reply cache (:class:`~bot.chat.state.ChatState`): in this
    process on SQLite, in the database replicas share on PostgreSQL (``bot.chat.state``
    picks, once, in :meth:`open`).
    """

    settings: Settings
    pipeline: Pipeline
    db: Database
    stt: SarvamSTT
    llm: OpenRouterClient
    pipeline_pool: ThreadPoolExecutor
    state: ChatState = field(default_factory=InProcessState)
    tts: SarvamTTS | None = None
    voice_pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="voice"))
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    channels: dict[str, ChannelPolicy] = field(default_factory=dict)
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
                pipeline_pool=ThreadPoolExecutor(settings.bot.pipeline_threads,
                                                 thread_name_prefix="pipeline"),
                state=open_state(db, settings),
                tts=SarvamTTS(settings.sarvam, settings.tts),
                voice_pool=ThreadPoolExecutor(settings.bot.voice_threads,
                                              thread_name_prefix="voice"),
            )
        except BaseException:
            await db.close()  # its worker thread would keep the process alive
            raise
        services.state.start()  # shared: prunes rows of senders who never come back
        freeze_loaded_objects()
        log.info("services open encoder=%s index=%s db=%s state=%s took_ms=%.0f",
                 pipeline.encoder.name, settings.rag.index_dir, db.backend.location.display,
                 services.state.kind, (time.perf_counter() - start) * 1e3)
        return services

    def policy(self, channel: str) -> ChannelPolicy:
        """The rules of ``channel`` as its front end registered them (``channels``); a channel
        that registered none has no allow-list and no size limit."""
        return self.channels.get(channel) or ChannelPolicy(channel)

    async def close(self) -> None:
        """Close the state's background work, the HTTP clients, the pipeline threads and the
        database (pending writes are already committed). Bounded: the shared state's prune loop
        gets :data:`bot.chat.tasks.STOP_WAIT_S` to end and is abandoned (logged) after that
        (``ChatState.close``, through ``bot.chat.tasks.stop_tasks``)."""
        await self.state.close()
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

    Each full collection walked them on the event loop's thread: with ``scripts/bench_bot.py``
    (50 chats at once) the generation-2 collections were the run's worst event-loop stalls, and
    frozen, the worst stall is far shorter (docs/benchmarks.md, "Bot"). Later calls do nothing
    (tests open many services in one process).
    """
    global _is_frozen
    if _is_frozen:
        return
    gc.collect()
    gc.freeze()
    _is_frozen = True
    log.info("gc frozen n_objects=%d", gc.get_freeze_count())


_is_frozen = False
