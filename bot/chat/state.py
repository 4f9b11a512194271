"""What replicas must agree on besides the inbox: the rate limit, the repeat window and the
spoken-reply cache, behind one interface (:class:`ChatState`) with two implementations, picked
once by :func:`open_state` when ``Services.open`` runs, by the database's dialect:

- SQLite (the default; one process): :class:`InProcessState`, this process's memory: the rate
  limit ``bot.chat.ratelimit``, the repeat window ``bot.chat.repeats`` and the voice cache
  ``bot.chat.voice_cache``; no database round trip per message.
- PostgreSQL (``BOT_DATABASE_URL``; any number of replicas): :class:`SharedState`, the database:
  ``storage.ratelimit.RateLimitStore`` (one window per sender and channel across replicas),
  ``storage.repeats.RepeatStore`` and ``storage.voice_index.VoiceIndex`` over OGG files in
  ``BOT_VOICE_CACHE_DIR``, with the in-memory voice cache in front; it deletes the rows that
  left their windows every :data:`PRUNE_EVERY_S` (:meth:`SharedState.prune_forever`).

Both key a sender and a chat by channel and id, so Telegram's 42 and WhatsApp's 42 never share
a window. The chat layer calls ``services.state`` and never asks which one it got.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from bot.chat.ratelimit import RateLimiter
from bot.chat.repeats import Repeat, RepeatFilter, question_key
from bot.chat.tasks import raise_if_cancelled, stop_tasks
from bot.chat.types import Asker
from bot.chat.voice_cache import VoiceAudio, VoiceCache, VoiceKey
from bot.settings import Settings
from storage.backend import POSTGRESQL, driver_errors
from storage.db import Database
from storage.ratelimit import RATE_ALLOWED, RateDecision, RateLimitStore
from storage.repeats import RepeatStore
from storage.voice_index import VoiceIndex, voice_key_digest

log = logging.getLogger(__name__)


class ChatState(ABC):
    """The rate limit, the repeat window and the spoken-reply cache of the chat layer.

    Each implementation has ``voice_cache``, the in-memory :class:`VoiceCache` every lookup
    tries first. ``kind`` names it in the ``services open ... state=`` log line; ``is_shared``
    says whether replicas share it (then they share the inbox too: ``bot.chat.inbox``).
    """

    kind: ClassVar[str]
    is_shared: ClassVar[bool]
    voice_cache: VoiceCache

    async def acquire(self, asker: Asker) -> RateDecision:
        """Count one message of ``asker``'s sender (``Asker.sender_id``) against the rate
        limit, keyed by channel and sender; always allowed without a sender (the console)."""
        if asker.sender_id is None:
            return RATE_ALLOWED
        return await self._acquire(asker.channel, asker.sender_id)

    @abstractmethod
    async def _acquire(self, channel: str, sender_id: int) -> RateDecision:
        """:meth:`acquire` for a message that has a sender."""

    @abstractmethod
    async def check_repeat(self, asker: Asker, text: str) -> Repeat | None:
        """None for a new question of ``asker``'s chat (remembered from now on), else the
        :class:`~bot.chat.repeats.Repeat` it is; the same message seen again (a replay, another
        replica taking it over) is never its own repeat."""

    @abstractmethod
    async def forget_repeat(self, asker: Asker, text: str) -> None:
        """Let ``text`` be asked again at once in ``asker``'s chat (its answer failed)."""

    @abstractmethod
    async def forget_repeats(self, asker: Asker) -> None:
        """Forget every question of ``asker``'s chat in the repeat window (``/new``, a
        ``/lang`` change: ``bot.chat.conversation.forget``)."""

    async def cached_voice(self, key: VoiceKey) -> VoiceAudio | None:
        """The voice note made before for ``key``: from memory, else from where the
        implementation keeps them (:meth:`_stored_voice`); None when there is none."""
        audio = self.voice_cache.get(key)
        if audio is None:
            audio = await self._stored_voice(key)
            if audio is not None:
                self.voice_cache.put(key, audio)
        return audio

    async def keep_voice(self, key: VoiceKey, audio: VoiceAudio) -> None:
        """Keep a voice note just made: in memory, and where the implementation keeps them
        (:meth:`_store_voice`). Never raises for a note that cannot be kept: the reply stands."""
        self.voice_cache.put(key, audio)
        await self._store_voice(key, audio)

    @abstractmethod
    async def _stored_voice(self, key: VoiceKey) -> VoiceAudio | None:
        """The voice note kept beyond this process's memory, else None."""

    @abstractmethod
    async def _store_voice(self, key: VoiceKey, audio: VoiceAudio) -> None:
        """Keep ``audio`` beyond this process's memory (where the implementation does)."""

    @abstractmethod
    def start(self) -> None:
        """Start the background work the state needs; ``Services.open`` calls it once, on the
        event loop."""

    @abstractmethod
    async def close(self) -> None:
        """Stop the background work, bounded (``bot.chat.tasks.stop_tasks``)."""


@dataclass(slots=True)
class InProcessState(ChatState):
    """This process's memory (one process, SQLite): ``limiter`` keyed ``(channel, sender id)``,
    ``repeats`` keyed ``(channel, chat id)``, ``voice_cache``; ``clock`` returns the monotonic
    seconds both windows are measured in (a test may fix it)."""

    kind: ClassVar[str] = "in_process"
    is_shared: ClassVar[bool] = False

    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0, 60.0))
    repeats: RepeatFilter = field(default_factory=RepeatFilter)
    voice_cache: VoiceCache = field(default_factory=lambda: VoiceCache(0))
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def from_settings(cls, settings: Settings) -> InProcessState:
        """The state ``BOT_RATE_LIMIT_N``/``BOT_RATE_LIMIT_WINDOW_S``, ``BOT_REPEAT_WINDOW_S``
        and ``TTS_CACHE_MB`` ask for."""
        bot = settings.bot
        return cls(limiter=RateLimiter(bot.rate_limit_n, bot.rate_limit_window_s),
                   repeats=RepeatFilter(bot.repeat_window_s),
                   voice_cache=VoiceCache(voice_cache_bytes(settings)))

    async def _acquire(self, channel: str, sender_id: int) -> RateDecision:
        return self.limiter.acquire((channel, sender_id), self.clock())

    async def check_repeat(self, asker: Asker, text: str) -> Repeat | None:
        return self.repeats.check((asker.channel, asker.chat_id), asker.message_id, text,
                                  self.clock())

    async def forget_repeat(self, asker: Asker, text: str) -> None:
        self.repeats.forget((asker.channel, asker.chat_id), text)

    async def forget_repeats(self, asker: Asker) -> None:
        self.repeats.forget_chat((asker.channel, asker.chat_id))

    async def _stored_voice(self, key: VoiceKey) -> VoiceAudio | None:
        return None  # memory only: the cache in front was the one place

    async def _store_voice(self, key: VoiceKey, audio: VoiceAudio) -> None:
        return None  # memory only

    def start(self) -> None:
        return None  # no background work

    async def close(self) -> None:
        return None


PRUNE_EVERY_S = 60.0
"""Seconds between two deletions of the rate-limit and repeat rows that left their windows
(:meth:`SharedState.prune_forever`). Each question deletes its own sender's and chat's old rows
already; this deletes those of senders and chats that never come back, which would otherwise
stay forever. A minute keeps both tables near the size of the last window's senders and costs
two DELETEs per replica per minute."""


@dataclass(slots=True)
class SharedState(ChatState):
    """The stores replicas share (PostgreSQL): ``limits`` keyed ``"<channel>:<sender id>"``,
    ``repeats`` keyed ``"<channel>:<chat id>"``, ``voice_index`` over the OGG files in
    ``voice_dir`` (at most ``voice_max_bytes`` of them; 0: no shared spoken-reply cache), with
    ``voice_cache`` in front. :meth:`start` runs :meth:`prune_forever`; :meth:`close` stops it
    within ``bot.chat.tasks.STOP_WAIT_S``."""

    kind: ClassVar[str] = "shared"
    is_shared: ClassVar[bool] = True

    limits: RateLimitStore
    repeats: RepeatStore
    voice_index: VoiceIndex
    voice_dir: Path
    voice_max_bytes: int
    voice_cache: VoiceCache = field(default_factory=lambda: VoiceCache(0))
    _pruner: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_settings(cls, db: Database, settings: Settings) -> SharedState:
        """The stores in ``db`` with the windows and budgets ``settings`` ask for."""
        bot = settings.bot
        return cls(limits=RateLimitStore(db, bot.rate_limit_n, bot.rate_limit_window_s),
                   repeats=RepeatStore(db, bot.repeat_window_s), voice_index=VoiceIndex(db),
                   voice_dir=bot.voice_cache_dir, voice_max_bytes=voice_cache_bytes(settings),
                   voice_cache=VoiceCache(voice_cache_bytes(settings)))

    async def _acquire(self, channel: str, sender_id: int) -> RateDecision:
        return await self.limits.acquire(f"{channel}:{sender_id}")

    async def check_repeat(self, asker: Asker, text: str) -> Repeat | None:
        seen = await self.repeats.check(f"{asker.channel}:{asker.chat_id}",
                                        _message_key(asker), question_key(text))
        if seen is None:
            return None
        first = seen.first_message_key
        first_id = int(first) if first is not None and first.isdigit() else None
        return Repeat(first_id, seen.age_s, seen.n_repeat)

    async def forget_repeat(self, asker: Asker, text: str) -> None:
        await self.repeats.forget(f"{asker.channel}:{asker.chat_id}", question_key(text))

    async def forget_repeats(self, asker: Asker) -> None:
        await self.repeats.forget_chat(f"{asker.channel}:{asker.chat_id}")

    async def _stored_voice(self, key: VoiceKey) -> VoiceAudio | None:
        """The file another replica made and indexed; None when there is none (or it is
        gone)."""
        if self.voice_max_bytes <= 0:
            return None
        entry = await self.voice_index.get(voice_key_digest(*key))
        if entry is None:
            return None
        try:
            ogg = await asyncio.to_thread(Path(entry.location).read_bytes)
        except OSError as exc:
            log.warning("voice_cache_missing location=%s detail=%s", entry.location, exc)
            return None
        return VoiceAudio(ogg, entry.duration_s)

    async def _store_voice(self, key: VoiceKey, audio: VoiceAudio) -> None:
        """A file indexed in the database, evicting the least recently used beyond the budget;
        a file that cannot be written is logged."""
        if self.voice_max_bytes <= 0 or len(audio.ogg) > self.voice_max_bytes:
            return
        digest = voice_key_digest(*key)
        path = self.voice_dir / f"{digest}.ogg"
        try:
            await asyncio.to_thread(_write_atomically, path, audio.ogg)
        except OSError as exc:
            log.warning("voice_cache_unwritable path=%s detail=%s", path, exc)
            return
        await self.voice_index.put(digest, str(path), audio.duration_s, len(audio.ogg))
        for gone in await self.voice_index.evict(self.voice_max_bytes):
            await asyncio.to_thread(_unlink, Path(gone.location))

    async def prune(self) -> int:
        """Delete every rate-limit and repeat row that left its window; returns how many."""
        return await self.limits.prune() + await self.repeats.prune()

    async def prune_forever(self, every_s: float = PRUNE_EVERY_S) -> None:
        """:meth:`prune` now and every ``every_s`` seconds until cancelled (every replica runs
        it; the DELETEs are idempotent). A database error is logged and tried again next time;
        a cancellation ends it whatever the driver turned it into (:mod:`bot.chat.tasks`)."""
        while True:
            try:
                n_rows = await self.prune()
                if n_rows:
                    log.info("shared_state_pruned rows=%d", n_rows)
            except driver_errors() as exc:
                raise_if_cancelled()
                log.warning("shared_state_prune_failed detail=%s", str(exc).strip()[:200])
            await asyncio.sleep(every_s)

    def start(self) -> None:
        """Prune the rows of senders and chats who never come back (:meth:`prune_forever`)."""
        if self._pruner is None:
            self._pruner = asyncio.create_task(self.prune_forever(), name="shared_state_prune")

    async def close(self) -> None:
        """Stop the prune loop: cancelled, waited for at most ``bot.chat.tasks.STOP_WAIT_S``,
        abandoned (logged ``task_abandoned what=shared_state_prune``) after that."""
        await stop_tasks([self._pruner], "shared_state_prune")


def open_state(db: Database, settings: Settings) -> ChatState:
    """:class:`SharedState` when ``db`` is PostgreSQL, else :class:`InProcessState`; nothing
    started yet (``ChatState.start``)."""
    if db.backend.dialect == POSTGRESQL:
        return SharedState.from_settings(db, settings)
    return InProcessState.from_settings(settings)


def voice_cache_bytes(settings: Settings) -> int:
    """The spoken-reply cache's budget in bytes: ``TTS_CACHE_MB`` MiB."""
    return int(settings.tts.cache_mb * 2**20)


def _message_key(asker: Asker) -> str | None:
    if asker.message_key is not None:
        return asker.message_key
    return None if asker.message_id is None else str(asker.message_id)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary name, so a replica never reads half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)
