"""The web page's conversations in the database: every message of a browser session and what the
page shows of its reply, so a restart keeps the page and every replica serves every session
(no sticky sessions).

Table ``web_exchanges`` (migration ``m010_web_conversations``): one row per message, named by
the inbox's ``message_key`` (``<chat id>:<message id>``). Storage does not read ``view``: it is
the front end's JSON of the reply (``bot.web``), NULL until the message is answered. A
recording waits in ``upload`` until it is answered (any replica may answer it), then is
dropped; the spoken reply stays in ``voice_ogg`` for the page's player.

What is kept (:meth:`WebExchanges.add` and :meth:`WebExchanges.expire`): a chat's newest
``history`` exchanges, and no exchange unchanged for longer than the keep window. Times are
Unix seconds (wall clock; replicas' clocks must agree, NTP).

    exchanges = WebExchanges(db)
    await exchanges.add(chat_id, f"{chat_id}:{msg}", "How much does an Xbox 360 cost?",
                        history=30)
    await exchanges.set_view(key, json.dumps(view), is_done=True)
    for shown in await exchanges.of_chat(chat_id): ...   # oldest first
    await exchanges.expire(before_s=time.time() - 30 * 86400)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .db import Database, _storable

_COLUMNS = ("message_key, chat_id, question, is_voice, view, is_done, voice_s, created_at_s, "
            "updated_at_s")


@dataclass(frozen=True, slots=True)
class StoredExchange:
    """One message of a browser session: ``key`` its inbox key, ``question`` as the page shows
    it, ``view`` the page's JSON of the reply (None until answered), ``voice_s`` the spoken
    reply's length in seconds (None: no spoken reply), ``created_at_s`` and ``updated_at_s`` in
    Unix seconds."""

    key: str
    chat_id: int
    question: str
    is_voice: bool
    view: str | None
    is_done: bool
    voice_s: float | None
    created_at_s: float
    updated_at_s: float


class WebExchanges:
    """The ``web_exchanges`` table; ``clock`` gives Unix seconds."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db, self.clock = db, clock

    async def add(self, chat_id: int, key: str, question: str, *, is_voice: bool = False,
                  upload: bytes | None = None, history: int = 30) -> bool:
        """Store a new message of chat ``chat_id`` (``upload``: its recording, kept until
        :meth:`set_view` marks it done) and drop the chat's exchanges beyond its newest
        ``history``. False (nothing changed) when ``key`` is already stored.

        Raises:
            ValueError: ``history`` below 1.
        """
        if history < 1:
            raise ValueError(f"history must be >= 1, got {history}")
        now_s = self.clock()
        async with self.db._transaction() as tx:
            n_rows = await tx.execute(
                "INSERT INTO web_exchanges (chat_id, message_key, question, is_voice, upload, "
                "created_at_s, updated_at_s) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (message_key) DO NOTHING",
                (chat_id, key, _storable(question), int(is_voice), upload, now_s, now_s))
            if n_rows == 0:
                return False
            await tx.execute(
                "DELETE FROM web_exchanges WHERE chat_id = ? AND id NOT IN (SELECT id FROM "
                "web_exchanges WHERE chat_id = ? ORDER BY id DESC LIMIT ?)",
                (chat_id, chat_id, history))
        return True

    async def of_chat(self, chat_id: int, limit: int = 1000) -> list[StoredExchange]:
        """The chat's newest ``limit`` exchanges, oldest first."""
        rows = await self.db._fetchall(
            f"SELECT {_COLUMNS} FROM (SELECT * FROM web_exchanges WHERE chat_id = ? "
            "ORDER BY id DESC LIMIT ?) newest ORDER BY id", (chat_id, limit))
        return [_exchange(row) for row in rows]

    async def get(self, key: str) -> StoredExchange | None:
        row = await self.db._fetchone(
            f"SELECT {_COLUMNS} FROM web_exchanges WHERE message_key = ?", (key,))
        return None if row is None else _exchange(row)

    async def knows(self, chat_id: int) -> bool:
        """Whether chat ``chat_id`` has asked anything that is still kept."""
        row = await self.db._fetchone(
            "SELECT 1 FROM web_exchanges WHERE chat_id = ? LIMIT 1", (chat_id,))
        return row is not None

    async def set_view(self, key: str, view: str | None, *, is_done: bool) -> bool:
        """Set what the page shows of ``key``'s reply; once ``is_done`` its recording is
        dropped. False when ``key`` is not stored (expired meanwhile)."""
        drop = ", upload = NULL" if is_done else ""
        async with self.db._transaction() as tx:
            n_rows = await tx.execute(
                f"UPDATE web_exchanges SET view = ?, is_done = ?, updated_at_s = ?{drop} "
                "WHERE message_key = ?", (_storable(view), int(is_done), self.clock(), key))
        return n_rows != 0

    async def set_voice(self, key: str, ogg: bytes, duration_s: float) -> bool:
        """Keep the spoken reply of ``key`` (OGG/Opus, ``duration_s`` seconds); False when
        ``key`` is not stored."""
        async with self.db._transaction() as tx:
            n_rows = await tx.execute(
                "UPDATE web_exchanges SET voice_ogg = ?, voice_s = ?, updated_at_s = ? "
                "WHERE message_key = ?", (ogg, duration_s, self.clock(), key))
        return n_rows != 0

    async def voice(self, key: str) -> bytes | None:
        """The spoken reply of ``key`` (OGG/Opus), None when there is none."""
        row = await self.db._fetchone(
            "SELECT voice_ogg FROM web_exchanges WHERE message_key = ?", (key,))
        return None if row is None or row[0] is None else bytes(row[0])

    async def upload(self, key: str) -> bytes | None:
        """The recording of ``key`` while it waits to be answered, else None."""
        row = await self.db._fetchone(
            "SELECT upload FROM web_exchanges WHERE message_key = ?", (key,))
        return None if row is None or row[0] is None else bytes(row[0])

    async def expire(self, before_s: float) -> int:
        """Delete every exchange last changed before ``before_s`` (Unix seconds); returns how
        many."""
        async with self.db._transaction() as tx:
            return max(await tx.execute(
                "DELETE FROM web_exchanges WHERE updated_at_s < ?", (before_s,)), 0)


def _exchange(row) -> StoredExchange:
    key, chat_id, question, is_voice, view, is_done, voice_s, created_at_s, updated_at_s = row
    return StoredExchange(key, chat_id, question, bool(is_voice), view, bool(is_done), voice_s,
                          created_at_s, updated_at_s)
