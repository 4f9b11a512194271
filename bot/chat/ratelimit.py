"""Per-user sliding-window rate limit. Pure: time comes in as an argument.

Two calls, named for what they do: :meth:`RateLimiter.peek_wait_s` only reads;
:meth:`RateLimiter.acquire` decides one message and records it. Call ``acquire`` once per
message (``bot.chat.context`` does) and let everything else read its verdict, a
:class:`storage.ratelimit.RateDecision` (the same type the replicas' shared limit returns).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable

from storage.ratelimit import RATE_ALLOWED, RateDecision


class RateLimiter:
    """At most ``max_n`` events per user in any ``window_s`` seconds.

    A user is any hashable key: the chat layer passes ``(channel, sender id)``
    (``bot.chat.state.InProcessState``), so Telegram's user 42 and WhatsApp's number 42 are two
    users, as in the replicas' shared limit (key ``"<channel>:<sender id>"``).

    ``max_n <= 0`` allows everything. State is in memory, one deque of timestamps per user
    that has an event in the current window, and for users who were told to wait, when they
    were told and when they were last refused (see :meth:`acquire`).
    """

    def __init__(self, max_n: int, window_s: float) -> None:
        self.max_n = max_n
        self.window_s = window_s
        self._events: dict[Hashable, deque[float]] = {}
        self._notice: dict[Hashable, tuple[float, float]] = {}  # (told at, last refused at)

    def peek_wait_s(self, user_id: Hashable, now_s: float) -> int:
        """Seconds ``user_id`` would have to wait at ``now_s`` (monotonic seconds): 0 when a
        message would be allowed, else whole seconds (≥ 1) until the oldest event in the window
        expires. Records nothing: calling it any number of times changes no later answer."""
        if self.max_n <= 0:
            return 0
        recent = [t for t in self._events.get(user_id, ()) if t > now_s - self.window_s]
        if len(recent) < self.max_n:
            return 0
        return max(1, math.ceil(recent[0] + self.window_s - now_s))

    def acquire(self, user_id: Hashable, now_s: float) -> RateDecision:
        """Decide one message of ``user_id`` at ``now_s`` (monotonic seconds), and record it.

        Returns:
            Allowed (``wait_s`` 0): the message counts as an event of the window. Refused: no
            event is recorded; ``wait_s`` as :meth:`peek_wait_s` says, and ``is_notice`` True
            for the first refusal (the user is told to wait), False while the user keeps
            sending anyway (the message is dropped). A user who stopped after the notice until
            allowed again, or was refused nothing for ``window_s``, gets a notice next time.
        """
        wait_s = self.peek_wait_s(user_id, now_s)
        if wait_s:
            return RateDecision(wait_s, self._is_notice(user_id, now_s))
        if self.max_n <= 0:
            return RATE_ALLOWED
        events = self._events.setdefault(user_id, deque())
        while events and events[0] <= now_s - self.window_s:
            events.popleft()
        events.append(now_s)
        told = self._notice.get(user_id)
        if told is not None and (told[1] == told[0] or told[1] <= now_s - self.window_s):
            del self._notice[user_id]  # they heeded the notice: a new burst earns a new one
        self._prune(now_s)
        return RATE_ALLOWED

    def _is_notice(self, user_id: Hashable, now_s: float) -> bool:
        """Record a refusal of ``user_id`` at ``now_s``: True (a notice) when the user was not
        told to wait, or not refused for ``window_s``; else False."""
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
