"""What replicas must agree on besides the inbox, decided here once: the rate limit, the repeat
window and the spoken-reply cache, in this process's memory or in the database.

- SQLite (the default; one process): :attr:`Services.shared` is None and the chat layer uses
  the in-memory ``services.limiter`` (``bot.chat.ratelimit``), ``services.repeats``
  (``bot.chat.repeats``) and ``services.voice_cache`` (``bot.chat.voice_cache``), as fast as
  before: no database round trip per message.
- PostgreSQL (``BOT_DATABASE_URL``; any number of replicas): :class:`SharedStores`, opened by
  :func:`open_shared`: ``storage.ratelimit.RateLimitStore`` (one window per sender and channel
  across replicas), ``storage.repeats.RepeatStore`` and ``storage.voice_index.VoiceIndex`` over
  OGG files in ``BOT_VOICE_CACHE_DIR`` (the in-memory cache stays in front of it).

The chat layer calls the functions below and never asks which one it got.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bot.chat.repeats import Repeat, question_key
from bot.chat.tasks import raise_if_cancelled
from bot.chat.types import Asker
from bot.chat.voice_cache import VoiceAudio, VoiceKey
from bot.settings import Settings
from storage.backend import POSTGRESQL, driver_errors
from storage.db import Database
from storage.ratelimit import RATE_ALLOWED, RateDecision, RateLimitStore
from storage.repeats import RepeatStore
from storage.voice_index import VoiceIndex, voice_key_digest

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SharedStores:
    """The stores replicas share: ``limits``, ``repeats``, ``voices`` (an index of the files in
    ``voice_dir``, at most ``voice_max_bytes`` of them; 0: no spoken-reply cache)."""

    limits: RateLimitStore
    repeats: RepeatStore
    voices: VoiceIndex
    voice_dir: Path
    voice_max_bytes: int


def open_shared(db: Database, settings: Settings) -> SharedStores | None:
    """The shared stores when ``db`` is PostgreSQL, else None (in-process state)."""
    if db.backend.dialect != POSTGRESQL:
        return None
    bot = settings.bot
    return SharedStores(
        limits=RateLimitStore(db, bot.rate_limit_n, bot.rate_limit_window_s),
        repeats=RepeatStore(db, bot.repeat_window_s),
        voices=VoiceIndex(db), voice_dir=bot.voice_cache_dir,
        voice_max_bytes=int(settings.tts.cache_mb * 2**20))


PRUNE_EVERY_S = 60.0
"""Seconds between two deletions of the rate-limit and repeat rows that left their windows
(:func:`prune_forever`). Each question deletes its own sender's and chat's old rows already; this
deletes those of senders and chats that never come back, which would otherwise stay forever. A
minute keeps both tables near the size of the last window's senders and costs two DELETEs per
replica per minute."""


async def prune(shared: SharedStores) -> int:
    """Delete every rate-limit and repeat row that left its window; returns how many."""
    return await shared.limits.prune() + await shared.repeats.prune()


async def prune_forever(shared: SharedStores, every_s: float = PRUNE_EVERY_S) -> None:
    """:func:`prune` now and every ``every_s`` seconds until cancelled (every replica runs it;
    the DELETEs are idempotent). A database error is logged and tried again next time; a
    cancellation ends it whatever the driver turned it into (:mod:`bot.chat.tasks`)."""
    while True:
        try:
            n_rows = await prune(shared)
            if n_rows:
                log.info("shared_state_pruned rows=%d", n_rows)
        except driver_errors() as exc:
            raise_if_cancelled()
            log.warning("shared_state_prune_failed detail=%s", str(exc).strip()[:200])
        await asyncio.sleep(every_s)


# the functions take ``services`` (a bot.chat.services.Services) untyped: that module builds it
# from open_shared, and importing it here would be circular


async def acquire(services, asker: Asker) -> RateDecision:
    """Count one message of ``asker``'s sender (``Asker.sender_id``) against the rate limit,
    keyed by channel and sender in memory and in the database alike; always allowed without a
    sender (the console)."""
    sender_id = asker.sender_id
    if sender_id is None:
        return RATE_ALLOWED
    if services.shared is None:
        return services.limiter.acquire((asker.channel, sender_id), services.clock())
    return await services.shared.limits.acquire(f"{asker.channel}:{sender_id}")


def _message_key(asker: Asker) -> str | None:
    if asker.message_key is not None:
        return asker.message_key
    return None if asker.message_id is None else str(asker.message_id)


async def check_repeat(services, asker: Asker, text: str) -> Repeat | None:
    """None for a new question of the chat (remembered from now on), else the
    :class:`~bot.chat.repeats.Repeat` it is; the same message seen again (a replay, another
    replica taking it over) is never its own repeat."""
    if services.shared is None:
        return services.repeats.check((asker.channel, asker.chat_id), asker.message_id, text,
                                      services.clock())
    seen = await services.shared.repeats.check(f"{asker.channel}:{asker.chat_id}",
                                               _message_key(asker), question_key(text))
    if seen is None:
        return None
    first = seen.first_message_key
    first_id = int(first) if first is not None and first.isdigit() else None
    return Repeat(first_id, seen.age_s, seen.n_repeat)


async def forget_repeat(services, asker: Asker, text: str) -> None:
    """Let ``text`` be asked again at once in ``asker``'s chat (its answer failed)."""
    if services.shared is None:
        services.repeats.forget((asker.channel, asker.chat_id), text)
    else:
        await services.shared.repeats.forget(f"{asker.channel}:{asker.chat_id}",
                                             question_key(text))


async def cached_voice(services, key: VoiceKey) -> VoiceAudio | None:
    """The voice note made before for ``key``: from memory, else (replicas) from the file
    another replica made and indexed; None when there is none (or its file is gone)."""
    audio = services.voice_cache.get(key)
    shared: SharedStores | None = services.shared
    if audio is not None or shared is None or shared.voice_max_bytes <= 0:
        return audio
    entry = await shared.voices.get(voice_key_digest(*key))
    if entry is None:
        return None
    try:
        ogg = await asyncio.to_thread(Path(entry.location).read_bytes)
    except OSError as exc:
        log.warning("voice_cache_missing location=%s detail=%s", entry.location, exc)
        return None
    audio = VoiceAudio(ogg, entry.duration_s)
    services.voice_cache.put(key, audio)
    return audio


async def keep_voice(services, key: VoiceKey, audio: VoiceAudio) -> None:
    """Keep a voice note just made: in memory, and (replicas) as a file indexed in the database,
    evicting the least recently used beyond the budget. A file that cannot be written is
    logged, never raised: the reply stands."""
    services.voice_cache.put(key, audio)
    shared: SharedStores | None = services.shared
    if shared is None or shared.voice_max_bytes <= 0 or len(audio.ogg) > shared.voice_max_bytes:
        return
    digest = voice_key_digest(*key)
    path = shared.voice_dir / f"{digest}.ogg"
    try:
        await asyncio.to_thread(_write_atomically, path, audio.ogg)
    except OSError as exc:
        log.warning("voice_cache_unwritable path=%s detail=%s", path, exc)
        return
    await shared.voices.put(digest, str(path), audio.duration_s, len(audio.ogg))
    for gone in await shared.voices.evict(shared.voice_max_bytes):
        await asyncio.to_thread(_unlink, Path(gone.location))


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary name, so a replica never reads half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)
