"""The index of spoken replies already made, in the database, so every replica finds a voice
note another one synthesised (and paid for) instead of making it again.

The audio itself lives wherever the caller keeps it (a shared folder, an object store):
the index maps a key (``voice_key_digest`` of text, language, speaker and model) to that
``location``, its duration and size, and when it was last used; :meth:`VoiceIndex.evict`
drops the least recently used entries beyond a byte budget and returns them so the caller
deletes their audio. Table ``voice_cache`` (migration ``m007_shared_state``).

    index = VoiceIndex(db)
    entry = await index.get(voice_key_digest(text, "hi", "anushka", "bulbul:v3"))
    if entry is None:
        await index.put(key, "voice-cache/ab12.ogg", duration_s=3.2, n_bytes=18_311)
    for gone in await index.evict(max_bytes=64 * 2**20): os.remove(gone.location)
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from .db import Database


def voice_key_digest(*parts: str) -> str:
    """A fixed-length key (SHA-256, hex) of everything that changes what is heard, e.g.
    (text, language code, speaker, model)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class VoiceEntry:
    """One stored voice note: where its audio is, ``duration_s`` seconds long, ``n_bytes``
    bytes, last used at ``used_at_s`` (Unix seconds)."""

    key: str
    location: str
    duration_s: float
    n_bytes: int
    used_at_s: float


class VoiceIndex:
    """``voice_cache`` rows; ``clock`` gives Unix seconds."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db, self.clock = db, clock

    async def get(self, key: str) -> VoiceEntry | None:
        """The entry under ``key``, now marked used, else None."""
        now_s = self.clock()
        async with self.db._transaction() as tx:
            row = await tx.fetchone(
                "UPDATE voice_cache SET used_at_s = ? WHERE key = ? "
                "RETURNING key, location, duration_s, n_bytes, used_at_s", (now_s, key))
        return None if row is None else VoiceEntry(*row)

    async def put(self, key: str, location: str, duration_s: float, n_bytes: int) -> None:
        """Store (or replace) the entry under ``key``, used now."""
        async with self.db._transaction() as tx:
            await tx.execute(
                "INSERT INTO voice_cache (key, location, duration_s, n_bytes, used_at_s) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "location = excluded.location, duration_s = excluded.duration_s, "
                "n_bytes = excluded.n_bytes, used_at_s = excluded.used_at_s",
                (key, location, duration_s, n_bytes, self.clock()))

    async def n_bytes(self) -> int:
        """Bytes of audio the index holds, in all."""
        row = await self.db._fetchone("SELECT COALESCE(SUM(n_bytes), 0) FROM voice_cache", ())
        return int(row[0])

    async def evict(self, max_bytes: int) -> list[VoiceEntry]:
        """Delete the least recently used entries until at most ``max_bytes`` remain; returns
        the deleted entries (oldest first) so the caller deletes their audio."""
        async with self.db._transaction() as tx:
            await tx.lock("voice_cache")
            rows = await tx.fetchall(
                "SELECT key, location, duration_s, n_bytes, used_at_s FROM voice_cache "
                "ORDER BY used_at_s DESC, key")
            kept, gone = 0, []
            for row in rows:
                kept += row[3]
                if kept > max_bytes:
                    gone.append(VoiceEntry(*row))
            await tx.executemany("DELETE FROM voice_cache WHERE key = ?",
                                 [(e.key,) for e in gone])
        return gone[::-1]
