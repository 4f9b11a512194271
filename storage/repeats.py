"""The repeat window in the database: the same question from the same chat within
``window_s`` seconds is answered once, whichever replica receives each copy, as long as no other
question came in between (``bot.chat.repeats.RepeatFilter`` keeps the same window in one
process's memory, and says why).

Table ``repeats`` (migration ``m007_shared_state``): one row per (chat, question key) seen
within the window; a new question replaces its chat's other rows. Storage compares keys only:
the caller makes them (``bot.chat.repeats.question_key``: the words case-folded) and names the
chat (e.g. ``"telegram:42"``). Each check is one transaction holding the chat's lock
(:meth:`storage.backend.Tx.lock`), so two replicas checking copies of one question at once see
one new question and one repeat. Times are Unix seconds (wall clock; replicas' clocks must
agree, NTP).

    repeats = RepeatStore(db, window_s=30.0)
    seen = await repeats.check("telegram:42", "42/1001/0", question_key(text))
    if seen is not None: ...  # seen.first_message_key, seen.age_s, seen.n_repeat
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .db import Database


@dataclass(frozen=True, slots=True)
class SeenRepeat:
    """A question that repeats an earlier one of its chat: the first one's message key (None
    when it had none), ``age_s`` seconds since it came, and ``n_repeat``: 1 for the first
    repeat, 2 for the second..."""

    first_message_key: str | None
    age_s: float
    n_repeat: int


class RepeatStore:
    """Each chat's questions for ``window_s`` seconds (0 turns the window off: nothing is
    stored, nothing is a repeat). ``clock`` gives Unix seconds."""

    def __init__(self, db: Database, window_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.db, self.window_s, self.clock = db, window_s, clock

    async def check(self, chat: str, message_key: str | None, question_key: str,
                    now_s: float | None = None) -> SeenRepeat | None:
        """None for a new question (remembered from ``now_s`` on, in place of the chat's
        earlier ones), else the :class:`SeenRepeat` it is: the same key as the chat's last
        question. The same message seen again (an edit, a replay: same ``message_key``) is
        never its own repeat; it restarts the window."""
        if self.window_s <= 0:
            return None
        now_s = self.clock() if now_s is None else now_s
        async with self.db._transaction() as tx:
            await tx.lock(f"repeat:{chat}")
            await tx.execute("DELETE FROM repeats WHERE chat = ? AND at_s < ?",
                             (chat, now_s - self.window_s))
            row = await tx.fetchone(
                "SELECT message_key, at_s, n_repeats FROM repeats "
                "WHERE chat = ? AND question_key = ?", (chat, question_key))
            if row is None or (message_key is not None and row[0] == message_key):
                await tx.execute("DELETE FROM repeats WHERE chat = ? AND question_key <> ?",
                                 (chat, question_key))
                await tx.execute(
                    "INSERT INTO repeats (chat, question_key, message_key, at_s, n_repeats) "
                    "VALUES (?, ?, ?, ?, 0) ON CONFLICT (chat, question_key) DO UPDATE SET "
                    "message_key = excluded.message_key, at_s = excluded.at_s, n_repeats = 0",
                    (chat, question_key, message_key, now_s))
                return None
            await tx.execute(
                "UPDATE repeats SET n_repeats = n_repeats + 1 "
                "WHERE chat = ? AND question_key = ?", (chat, question_key))
        return SeenRepeat(row[0], now_s - row[1], row[2] + 1)

    async def forget(self, chat: str, question_key: str) -> None:
        """Let the question be asked again at once (its answer failed: a retry deserves one)."""
        async with self.db._transaction() as tx:
            await tx.execute("DELETE FROM repeats WHERE chat = ? AND question_key = ?",
                             (chat, question_key))

    async def forget_chat(self, chat: str) -> None:
        """Forget every question of ``chat`` (``/new``: the next message is new whatever it
        says)."""
        async with self.db._transaction() as tx:
            await tx.execute("DELETE FROM repeats WHERE chat = ?", (chat,))

    async def prune(self, now_s: float | None = None) -> int:
        """Delete every chat's questions older than the window; returns how many. Call it now
        and then; :meth:`check` prunes its own chat anyway."""
        since_s = (self.clock() if now_s is None else now_s) - self.window_s
        async with self.db._transaction() as tx:
            return max(await tx.execute("DELETE FROM repeats WHERE at_s < ?", (since_s,)), 0)
