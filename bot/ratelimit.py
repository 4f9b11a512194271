"""Per-user sliding-window rate limit. Pure: time comes in as an argument."""

from __future__ import annotations

import math
from collections import deque


class RateLimiter:
    """At most ``max_n`` events per user in any ``window_s`` seconds.

    ``max_n <= 0`` allows everything. State is in memory, one deque of timestamps per user
    that has an event in the current window, and the time of each user's "please wait" notice
    since their last allowed event (see :meth:`should_notify`).
    """

    def __init__(self, max_n: int, window_s: float) -> None:
        self.max_n = max_n
        self.window_s = window_s
        self._events: dict[int, deque[float]] = {}
        self._notified_s: dict[int, float] = {}

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
        self._notified_s.pop(user_id, None)  # a new burst earns a new notice
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
        seconds), to wait: True (and recorded) for the first refusal since the user's last
        allowed event, False for the further ones, which are dropped."""
        if user_id in self._notified_s:
            return False
        self._notified_s[user_id] = now_s
        return True

    def _prune(self, now_s: float) -> None:
        """Forget users whose events and notice all left the window (keeps memory bounded by
        active users)."""
        if len(self._events) < 1024 and len(self._notified_s) < 1024:
            return
        stale = [u for u, ev in self._events.items() if not ev or ev[-1] <= now_s - self.window_s]
        for user_id in stale:
            del self._events[user_id]
        for user_id in [u for u, s in self._notified_s.items() if s <= now_s - self.window_s]:
            del self._notified_s[user_id]
