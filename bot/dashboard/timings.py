"""Stage timings of the whole decision log for the latency page and ``/metrics``, without
parsing every trace at every request: decisions older than :data:`SETTLE_S` are read once and
kept in memory (a float per stage per decision), only newer ones are read each time."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from storage.reader import DecisionReader

SETTLE_S = 300.0
"""Seconds after which a decision's timings no longer change: its spoken reply's stages
(``add_stages``) and reply time (``set_reply_ms``) are stored within the reply's own time limits
(20 s for the voice note), far inside five minutes."""


class StageTimings:
    """All stage timings (``DecisionReader.stage_timings``' shape), settled part cached."""

    def __init__(self) -> None:
        self._settled_id = 0
        self._settled: dict[str, list[float]] = defaultdict(list)
        self._lock = asyncio.Lock()

    async def all(self, reader: DecisionReader) -> dict[str, list[float]]:
        async with self._lock:
            settled_id = await reader.settled_id(SETTLE_S)
            if settled_id < self._settled_id:  # the database was replaced or cleared
                self._settled_id, self._settled = 0, defaultdict(list)
            if settled_id > self._settled_id:
                new = await reader.stage_timings(self._settled_id, settled_id)
                for name, values in new.items():
                    self._settled[name].extend(values)
                self._settled_id = settled_id
            tail = await reader.stage_timings(self._settled_id)
        merged = {name: list(values) for name, values in self._settled.items()}
        for name, values in tail.items():
            merged.setdefault(name, []).extend(values)
        return merged
