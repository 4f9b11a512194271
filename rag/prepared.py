"""A question's state between the pipeline's steps (:class:`Prepared`) and the refusal a step
raises (:class:`Refused`), with the :class:`~rag.types.Result` fields they fill."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag.answer import GateVerdict, QuestionStyle, ReaderScores
from rag.guards import RelevanceVerdict
from rag.language import LanguageBasis
from rag.selection import Selection
from rag.text import undecorated
from rag.types import FollowUpReading, Hit, QuestionCut, Reason, ReasonCode, Result, Status, Trace


@dataclass(slots=True)
class Prepared:
    """State after the relevance guard passed: what an answer stage needs.

    ``query`` is what is searched (``basis.searched`` or the question), ``asked`` the question
    as the user put it (the input guard's cleaned text); ``vector`` the query embedding,
    float32 (dim,); ``hits`` non-empty, best first; ``basis`` how the language was decided
    (:class:`rag.language.LanguageBasis`); ``style`` how the question was put (a gate signal);
    ``selection`` the sentence(s) chosen across the hits, ``reading`` the reader's scores of the
    candidates read (None: not read), ``gate`` the gate's verdict (None without a gate;
    ``gate.is_hedged``: the answer is shown as "not sure"), all three set by the answer stage
    (``rag/answer/stage.py``).
    """

    query: str
    lang: str
    vector: np.ndarray
    hits: list[Hit]
    relevance: RelevanceVerdict
    trace: Trace
    asked: str = ""
    basis: LanguageBasis | None = None
    style: QuestionStyle = QuestionStyle()
    selection: Selection | None = None
    reading: ReaderScores | None = None
    gate: GateVerdict | None = None
    cut: QuestionCut | None = None
    """The input guard's cut of an over-long question (None: read whole)."""
    followup: FollowUpReading | None = None
    """How the message was read after a previous turn (None: no previous turn given)."""

    def result(self, status: Status, **fields) -> Result:
        """A Result carrying this question's query (as asked, and as searched when that
        differs), language and its basis, scores, floor and trace."""
        return Result(
            status,
            self.asked or self.query,
            self.lang,
            searched=searched_field(self.asked, self.query),
            top_score=self.relevance.top_score,
            floor=self.relevance.floor,
            is_low_confidence=self.relevance.is_low_confidence,
            trace=self.trace,
            basis=self.basis,
            cut=self.cut,
            followup=self.followup,
            **best_passage(self.hits),
            **fields,
        )

    @property
    def is_hedged(self) -> bool:
        """The gate passed the question as hedged (not sure)."""
        return self.gate is not None and self.gate.is_hedged

    def reason(self, code: ReasonCode, detail: str, **numbers) -> Reason:
        """A :class:`Reason` carrying this question's top score, floor and language."""
        return Reason(code, detail, score=self.relevance.top_score, floor=self.relevance.floor,
                      lang=self.lang, **numbers)

    def hedge_fields(self) -> dict:
        """``message`` and ``reason`` of a hedged answer (the gate's numbers); none else."""
        if not self.is_hedged:
            return {}
        g = self.gate
        message = (f"hedged: p {g.probability:.3f} < threshold {g.threshold:.3f}, >= hedge "
                   f"threshold {g.hedge_threshold:.3f}")
        return {"message": message,
                "reason": self.reason(ReasonCode.HEDGED, message, probability=g.probability,
                                      threshold=g.threshold)}

    def refused(self, status: Status, code: ReasonCode, detail: str, **numbers) -> Refused:
        """The :class:`Refused` of ``status`` with ``detail`` as its message and reason."""
        return Refused(self.result(status, message=detail,
                                   reason=self.reason(code, detail, **numbers)))


def best_passage(hits: list[Hit]) -> dict:
    """``Result.best_passage_id`` and ``best_passage_score`` from ``hits`` (best first)."""
    if not hits:
        return {}
    return {"best_passage_id": hits[0].passage.id, "best_passage_score": hits[0].score}


def searched_field(asked: str, text: str) -> str:
    """``Result.searched``: ``text`` (what was searched) when it is not ``asked`` as read (its
    decorations removed: :func:`rag.text.undecorated`), else ``""``."""
    return text if asked and text and text != undecorated(asked) else ""


class Refused(Exception):  # noqa: N818 (a refusal is an outcome, not an error)
    """A step of ``Pipeline.prepare`` refused the question: ``result`` is the refusal
    :class:`Result` (status, reason with its numbers, trace so far) that prepare returns. Raised
    after the step's ``trace.timed`` block closes, so the stage keeps its own decision."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.message)
        self.result = result
