"""Pure summaries for the dashboard's pages: percentiles of stage timings, score histograms."""

from __future__ import annotations

import math
from dataclasses import dataclass

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


@dataclass(frozen=True, slots=True)
class StageLatency:
    """Timings of one trace stage over ``n`` decisions, in milliseconds: ``percentiles_ms``
    maps each of :data:`PERCENTILES` to its value (nearest rank); ``max_ms`` the slowest."""

    name: str
    n: int
    percentiles_ms: dict[int, float]
    max_ms: float


def percentile(sorted_values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p <= 100) of an ascending, non-empty list."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def stage_latencies(timings: dict[str, list[float]]) -> list[StageLatency]:
    """One :class:`StageLatency` per stage that has timings, in the order given."""
    out = []
    for name, values in timings.items():
        if not values:
            continue
        ordered = sorted(values)
        out.append(StageLatency(name, len(ordered),
                                {p: percentile(ordered, p) for p in PERCENTILES}, ordered[-1]))
    return out


@dataclass(frozen=True, slots=True)
class Histogram:
    """Counts of values in ``n_bins`` equal bins from ``lo`` to ``hi`` (cosines)."""

    lo: float
    hi: float
    counts: list[int]

    @property
    def width(self) -> float:
        return (self.hi - self.lo) / len(self.counts)


def histogram(values: list[float], floor: float | None, n_bins: int = 24) -> Histogram:
    """Bins over the values and the floor, widened to whole hundredths (at least 0.1 wide)."""
    points = [*values, *([floor] if floor is not None else [])]
    lo = math.floor(min(points) * 100) / 100
    hi = math.ceil(max(points) * 100) / 100
    if hi - lo < 0.1:
        mid = (hi + lo) / 2
        lo, hi = round(mid - 0.05, 2), round(mid + 0.05, 2)
    counts = [0] * n_bins
    for v in values:
        i = min(n_bins - 1, int((v - lo) / (hi - lo) * n_bins))
        counts[max(0, i)] += 1
    return Histogram(lo, hi, counts)
