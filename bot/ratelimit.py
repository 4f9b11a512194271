"""Per-user sliding-window rate limit. Pure: time comes in as an argument."""

from __future__ import annotations

import math
from collections import deque


class RateLimiter:
    """At most ``max_n`` events per user in any ``window_s`` seconds.

    ``max_n <= 0`` allows everything. State is in memory, one deque of timestamps per user
    that has an event in the current window, and for users who were told to wait, when they
    were told and when they were last refused (see :meth:`should_notify`).
    """

    def __init__(self, max_n: int, window_s: float) -> None:
        self.max_n = max_n
        self.window_s = window_s
        self._events: dict[int, deque[float]] = {}
        self._notice: dict[int, tuple[float, float]] = {}  # (told at, last refused at)

    def wait_s(self, user_id: int, now_s: float) -> int:
        """Record an event for ``user_id`` at ``now_s`` (monotonic seconds) if allowed.

        Returns:
            0 when allowed (and recorded); otherwise the whole seconds (≥ 1) until the oldest
            event in the window expires, and nothing is recorded.
        """
        if self.max_n <= 0:
            return 0
        events = self._events.setdefault(user_id, deque())
        while events and events[0] <= now_s - self.window_s:
            events.popleft()
        if len(events) >= self.max_n:
            return max(1, math.ceil(events[0] + self.window_s - now_s))
        events.append(now_s)
        told = self._notice.get(user_id)
        if told is not None and (told[1] == told[0] or told[1] <= now_s - self.window_s):
            del self._notice[user_id]  # they heeded the notice: a new burst earns a new one
        self._prune(now_s)
        return 0

    def is_limited(self, user_id: int, now_s: float) -> bool:
        """Whether :meth:`wait_s` would refuse ``user_id`` at ``now_s``; records nothing."""
        if self.max_n <= 0:
            return False
        events = self._events.get(user_id, ())
        return sum(t > now_s - self.window_s for t in events) >= self.max_n

    def should_notify(self, user_id: int, now_s: float) -> bool:
        """Whether to tell ``user_id``, refused by :meth:`wait_s` at ``now_s`` (monotonic
        seconds), to wait: True (and recorded) for the first refusal; False, and the message is
        dropped, while the user keeps sending anyway. A user who stopped after the notice until
        allowed again, or was refused nothing for ``window_s``, gets a notice next time."""
        told = self._notice.get(user_id)
        if told is None or told[1] <= now_s - self.window_s:
            self._notice[user_id] = (now_s, now_s)
            return True
        self._notice[user_id] = (told[0], now_s)
        return False

    def _prune(self, now_s: float) -> None:
        """Forget users whose events and notice all left the window (keeps memory bounded by
        active users)."""
        if len(self._events) < 1024 and len(self._notice) < 1024:
            return
        stale = [u for u, ev in self._events.items() if not ev or ev[-1] <= now_s - self.window_s]
        for user_id in stale:
            del self._events[user_id]
        for user_id in [u for u, t in self._notice.items() if t[1] <= now_s - self.window_s]:
            del self._notice[user_id]
