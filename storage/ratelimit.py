"""A per-key sliding-window rate limit kept in the database, so every replica counts against
the same window (``bot.chat.ratelimit.RateLimiter`` keeps it in one process's memory).

Same rule and verdicts as ``bot.chat.ratelimit``: at most ``max_n`` allowed events per key in any
``window_s`` seconds; a refused event is not counted; the first refusal is a notice ("please
wait N s"), later ones while the sender keeps trying are silent; a sender who stopped until
allowed again, or was refused nothing for ``window_s``, gets a notice next time.

Tables ``rate_events`` (one row per allowed event inside the window) and ``rate_limits`` (when
the key was told to wait and last refused), migration ``m007_shared_state``. Each decision is
one transaction holding the key's lock (:meth:`storage.backend.Tx.lock`), so concurrent
acquires on any number of replicas allow exactly ``max_n``. Times are Unix seconds (wall
clock, ``time.time``): replicas' clocks must agree to well under a second (NTP).

    limiter = RateLimitStore(db, max_n=5, window_s=30.0)
    verdict = await limiter.acquire("telegram:user:42")
    if not verdict.is_allowed: ...  # verdict.wait_s, verdict.is_notice
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from .db import Database


@dataclass(frozen=True, slots=True)
class RateDecision:
    """One event's verdict: ``wait_s`` 0 when allowed (and counted), else whole seconds (≥ 1)
    until the key may act again; ``is_notice`` True for a refusal worth telling the sender
    about, False for one dropped silently (and for every allowed event)."""

    wait_s: int = 0
    is_notice: bool = False

    @property
    def is_allowed(self) -> bool:
        return self.wait_s == 0


RATE_ALLOWED = RateDecision()


class RateLimitStore:
    """At most ``max_n`` events per key in any ``window_s`` seconds, across replicas.

    ``max_n <= 0`` allows everything without touching the database. ``key`` is any text the
    caller chooses (e.g. ``"telegram:user:42"``); ``clock`` gives Unix seconds (tests pass a
    fake one, or give ``now_s`` to each call).
    """

    def __init__(self, db: Database, max_n: int, window_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0 seconds, got {window_s}")
        self.db, self.max_n, self.window_s, self.clock = db, max_n, window_s, clock

    async def peek_wait_s(self, key: str, now_s: float | None = None) -> int:
        """Seconds ``key`` would wait at ``now_s``: 0 when an event would be allowed, else whole
        seconds (≥ 1) until its oldest event leaves the window. Writes nothing."""
        if self.max_n <= 0:
            return 0
        now_s = self.clock() if now_s is None else now_s
        rows = await self.db._fetchall(
            "SELECT at_s FROM rate_events WHERE key = ? AND at_s > ? ORDER BY at_s",
            (key, now_s - self.window_s))
        return self._wait_s([r[0] for r in rows], now_s)

    async def acquire(self, key: str, now_s: float | None = None) -> RateDecision:
        """Decide one event of ``key`` at ``now_s`` (Unix seconds, default the clock) and record
        it: allowed events are counted; a refusal records only when it was (notice or not)."""
        if self.max_n <= 0:
            return RATE_ALLOWED
        now_s = self.clock() if now_s is None else now_s
        since_s = now_s - self.window_s
        async with self.db._transaction() as tx:
            await tx.lock(f"rate:{key}")
            await tx.execute("DELETE FROM rate_events WHERE key = ? AND at_s <= ?",
                             (key, since_s))
            rows = await tx.fetchall(
                "SELECT at_s FROM rate_events WHERE key = ? ORDER BY at_s", (key,))
            told = await tx.fetchone(
                "SELECT told_at_s, refused_at_s FROM rate_limits WHERE key = ?", (key,))
            wait_s = self._wait_s([r[0] for r in rows], now_s)
            if wait_s:
                is_notice = told is None or told[1] <= since_s
                await tx.execute(
                    "INSERT INTO rate_limits (key, told_at_s, refused_at_s) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET told_at_s = excluded.told_at_s, "
                    "refused_at_s = excluded.refused_at_s",
                    (key, now_s if is_notice else told[0], now_s))
                return RateDecision(wait_s, is_notice)
            await tx.execute("INSERT INTO rate_events (key, at_s) VALUES (?, ?)", (key, now_s))
            if told is not None and (told[1] == told[0] or told[1] <= since_s):
                # they heeded the notice: a new burst earns a new one
                await tx.execute("DELETE FROM rate_limits WHERE key = ?", (key,))
        return RATE_ALLOWED

    async def prune(self, now_s: float | None = None) -> int:
        """Delete every key's events and notices that left the window (keeps the tables as
        small as the active senders); returns the number of rows deleted. Call it now and then
        (e.g. once a minute from one replica); :meth:`acquire` prunes its own key anyway."""
        since_s = (self.clock() if now_s is None else now_s) - self.window_s
        async with self.db._transaction() as tx:
            n_events = await tx.execute("DELETE FROM rate_events WHERE at_s <= ?", (since_s,))
            n_keys = await tx.execute("DELETE FROM rate_limits WHERE refused_at_s <= ?",
                                      (since_s,))
        return max(n_events, 0) + max(n_keys, 0)

    def _wait_s(self, events_s: list[float], now_s: float) -> int:
        if len(events_s) < self.max_n:
            return 0
        return max(1, math.ceil(events_s[-self.max_n] + self.window_s - now_s))
