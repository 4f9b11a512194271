"""``/metrics`` in Prometheus' text format, computed from the decision log at each scrape.

Every value is a count over the whole database (``storage.reader``), so counters only grow while
the bot writes and match the log exactly (a scrape of a copied or cleared database starts over,
which Prometheus treats as a counter reset):

- ``voice_rag_questions_total{channel, lang, status, reason}``: decisions; ``reason`` is the
  ``rag.types.ReasonCode`` value, ``none`` when answered, ``hedged`` for a hedged answer (its
  status ``hedged``, issue 31);
- ``voice_rag_stage_duration_seconds{stage}``: histogram of every traced stage's time;
- ``voice_rag_question_duration_seconds{part}``: histogram of the pipeline's total
  (``pipeline``), the speech-to-text call (``stt``) and sending the reply (``reply``);
- ``voice_rag_speech_errors_total{service, stage, kind}``: failed speech-to-text (``stt``) and
  text-to-speech (``tts``) stages;
- ``voice_rag_inbox_backlog{channel, status}``: incoming messages not yet answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from storage.reader import DecisionReader

BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                2.5, 5.0, 10.0, 30.0)
"""Histogram bucket bounds in seconds: from a millisecond (language detection, guards) to
Sarvam's 30 s (a long voice note's speech-to-text)."""
TOTALS: dict[str, str] = {"pipeline_total": "pipeline", "stt_total": "stt", "reply": "reply"}
"""``DecisionReader.stage_timings`` names of whole-question times, and their ``part`` label."""


class _Snapshot(Collector):
    """Metric families computed beforehand (the reader is async, ``collect`` is not)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self) -> Iterable:
        return iter(self.families)


async def render_metrics(reader: DecisionReader, timings: dict[str, list[float]]) -> bytes:
    """The exposition text (``prometheus_client.exposition.CONTENT_TYPE_LATEST``);
    ``timings`` are ``DecisionReader.stage_timings`` over the whole log (milliseconds)."""
    questions = CounterMetricFamily(
        "voice_rag_questions", "Questions decided, by front end, language, status and reason.",
        labels=["channel", "lang", "status", "reason"])
    for c in await reader.question_counts():
        questions.add_metric([c.channel, c.lang, c.status, c.reason], c.n)

    stages = HistogramMetricFamily(
        "voice_rag_stage_duration_seconds", "Time of each traced stage of a question.",
        labels=["stage"])
    totals = HistogramMetricFamily(
        "voice_rag_question_duration_seconds",
        "Time of a question's pipeline, speech-to-text call and reply delivery.", labels=["part"])
    for name, values_ms in timings.items():
        family, label = (totals, TOTALS[name]) if name in TOTALS else (stages, name)
        buckets, total_s = _buckets(values_ms)
        family.add_metric([label], buckets, total_s)

    errors = CounterMetricFamily(
        "voice_rag_speech_errors", "Failed speech-to-text and text-to-speech stages.",
        labels=["service", "stage", "kind"])
    failures = Counter((f.service, f.stage, f.kind) for f in await reader.speech_failures())
    for labels, n in sorted(failures.items()):
        errors.add_metric(list(labels), n)

    backlog = GaugeMetricFamily(
        "voice_rag_inbox_backlog", "Incoming messages stored but not yet answered.",
        labels=["channel", "status"])
    for b in await reader.inbox_backlog():
        backlog.add_metric([b.channel, b.status], b.n)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot([questions, stages, totals, errors, backlog]))
    return generate_latest(registry)


def _buckets(values_ms: list[float]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative counts per bucket bound (``+Inf`` last) and the sum, in seconds."""
    values_s = sorted(v / 1000 for v in values_ms)
    out, i = [], 0
    for bound in BUCKETS_S:
        while i < len(values_s) and values_s[i] <= bound:
            i += 1
        out.append((repr(bound), i))
    out.append(("+Inf", len(values_s)))
    return out, sum(values_s)
