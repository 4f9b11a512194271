"""Pure summaries for the dashboard's pages: percentiles of stage timings, score histograms."""

from __future__ import annotations

import math
from dataclasses import dataclass

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
STAGE_ORDER: tuple[str, ...] = (
    "forwarded", "voice_checks", "download", "transcode", "speech_gate", "split",
    "speech_to_text", "voice", "input_guard", "language", "embed", "search", "relevance_guard",
    "select_answer", "answerability_gate", "answer", "generate", "grounding_guard",
    "text_to_speech", "encode_voice", "send_voice")
"""Where a stage comes in a question's life (the voice stages, the pipeline's, the spoken
reply's); others follow in the order first seen, then the totals."""
TOTAL_NAMES: tuple[str, ...] = ("pipeline_total", "stt_total", "reply")


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
    """One :class:`StageLatency` per stage that has timings, in :data:`STAGE_ORDER`."""
    known = [n for n in STAGE_ORDER if n in timings]
    others = [n for n in timings if n not in STAGE_ORDER and n not in TOTAL_NAMES]
    out = []
    for name in [*known, *others, *(n for n in TOTAL_NAMES if n in timings)]:
        values = timings[name]
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
    """Bins over the values and the floor with 0.02 to spare on each side, widened to whole
    hundredths (at least 0.1 wide)."""
    points = [*values, *([floor] if floor is not None else [])]
    lo = math.floor((min(points) - 0.02) * 100) / 100
    hi = math.ceil((max(points) + 0.02) * 100) / 100
    if hi - lo < 0.1:
        mid = (hi + lo) / 2
        lo, hi = round(mid - 0.05, 2), round(mid + 0.05, 2)
    counts = [0] * n_bins
    for v in values:
        i = min(n_bins - 1, int((v - lo) / (hi - lo) * n_bins))
        counts[max(0, i)] += 1
    return Histogram(lo, hi, counts)
