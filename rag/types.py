"""Named result types shared by every stage of the pipeline.

Nothing here imports Telegram, httpx or a model: these are plain data that a CLI, the bot or a
test can build and read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum

LANGUAGES: tuple[str, ...] = ("en", "hi", "gu", "te")
"""Languages the corpus and the floors cover, as ISO 639-1 codes."""


class Status(StrEnum):
    """Every outcome of one question. Anything but ``ANSWERED`` shows no answer text."""

    ANSWERED = "answered"
    REFUSED_BAD_INPUT = "refused-bad-input"
    REFUSED_NO_MATCH = "refused-no-match"
    REFUSED_UNANSWERABLE = "refused-unanswerable"
    REFUSED_UNGROUNDED = "refused-ungrounded"
    ERROR = "error"

    @property
    def is_refusal(self) -> bool:
        return self.value.startswith("refused")


@dataclass(frozen=True, slots=True)
class Passage:
    """One corpus passage, as stored in ``passages.jsonl``.

    ``id`` is ``{lang}-{query_id}-{passage_index}``; ``passage_index`` matches across languages,
    so ``hi-1102432-5`` is the Hindi translation of ``en-1102432-5``.
    """

    id: str
    lang: str
    text: str
    query_id: int
    passage_index: int
    is_selected: bool = False

    def sibling_id(self, lang: str) -> str:
        """Id of this passage's parallel translation in ``lang``."""
        return f"{lang}-{self.query_id}-{self.passage_index}"


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved passage. ``score`` is the cosine similarity in [-1, 1];
    ``rank_score`` adds the same-language bonus and only orders hits."""

    passage: Passage
    score: float
    rank_score: float


@dataclass(frozen=True, slots=True)
class Citation:
    """A passage the answer rests on, with its cosine to the query."""

    passage_id: str
    lang: str
    score: float
    excerpt: str


@dataclass(frozen=True, slots=True)
class Stage:
    """One decision in the trace, e.g.
    ``Stage("relevance_guard", "refused", "top 0.779 < floor 0.840 (en)", 0.01)``."""

    name: str
    decision: str
    detail: str
    elapsed_ms: float


@dataclass(slots=True)
class Trace:
    """Ordered list of stages; ``total_ms`` sums their elapsed time."""

    stages: list[Stage] = field(default_factory=list)

    def add(self, name: str, decision: str, detail: str = "", elapsed_ms: float = 0.0) -> Stage:
        stage = Stage(name, decision, detail, round(elapsed_ms, 3))
        self.stages.append(stage)
        return stage

    @contextmanager
    def timed(self, name: str) -> Iterator[_OpenStage]:
        """Time a block and record it as one stage; the block sets ``decision`` and ``detail``.

        If the block raises, the stage is recorded with decision ``error`` and the exception
        propagates.
        """
        open_stage = _OpenStage()
        start = time.perf_counter()
        try:
            yield open_stage
        except BaseException as exc:
            open_stage.decision, open_stage.detail = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            elapsed_ms = (time.perf_counter() - start) * 1000
            self.add(name, open_stage.decision, open_stage.detail, elapsed_ms)

    @property
    def total_ms(self) -> float:
        return round(sum(s.elapsed_ms for s in self.stages), 3)

    def get(self, name: str) -> Stage | None:
        """The last stage called ``name``, or None."""
        return next((s for s in reversed(self.stages) if s.name == name), None)

    def to_list(self) -> list[dict]:
        return [asdict(s) for s in self.stages]

    @classmethod
    def from_list(cls, rows: list[dict]) -> Trace:
        return cls([Stage(**row) for row in rows])


@dataclass(slots=True)
class _OpenStage:
    decision: str = "ok"
    detail: str = ""


@dataclass(slots=True)
class Result:
    """The one outcome type for a question: answered, refused or error, always with its trace.

    ``top_score`` and ``floor`` are cosine similarities (None when retrieval did not run).
    ``message`` is a short English reason for refusals and errors; front ends word it for users
    from ``status``, ``top_score`` and ``floor``.
    """

    status: Status
    query: str
    lang: str
    answer: str = ""
    answer_lang: str = ""
    citations: list[Citation] = field(default_factory=list)
    top_score: float | None = None
    floor: float | None = None
    is_low_confidence: bool = False
    mode: str = "extractive"
    message: str = ""
    trace: Trace = field(default_factory=Trace)

    @property
    def is_answered(self) -> bool:
        return self.status is Status.ANSWERED

    def to_dict(self) -> dict:
        out = asdict(self)
        out["status"] = self.status.value
        out["trace"] = self.trace.to_list()
        out["total_ms"] = self.trace.total_ms
        return out
