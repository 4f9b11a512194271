"""The answer stage of one question that cleared the floor: select, read, re-pick, gate.

1. **Select** (``select_answer`` stage): every sentence of the top hits, read in the question's
   language, scored by the selector (``rag/selection.py``); the best is the answer so far.
2. **Read** (``reader`` stage), where the language has a reader and the gate a reader model:
   the reader (``rag/answer/readers.py``) scores the selector's best ``reader_top_k``
   candidates, and the answer is re-picked among them by the selector's and the reader's logits
   together (:func:`repick`, weights per reader in the gate file).
3. **Gate** (``answerability_gate`` stage): the verdict of the gate file's models
   (``rag/answer/gate.py``): confident, hedged or refused.

:class:`AnswerStage` runs them for the pipeline (one question); ``scripts/fit_answering.py``
calls the same :func:`repick`, :func:`~rag.answer.signals.gate_features` and
:meth:`GateModels.decisions` over its many questions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rag.answer.gate import READER_TOP_K, GateModels, GateVerdict, pick_order
from rag.answer.readers import Reader
from rag.answer.signals import (
    TYPED,
    QuestionStyle,
    ReaderScores,
    gate_features,
    reader_signals,
)
from rag.selection import AnswerSelector, Idf, Selection
from rag.types import Hit, Passage, Trace


def repick(selector: AnswerSelector, query: str, selection: Selection, scores: Sequence[float],
           weights: Sequence[float]) -> tuple[Selection, list[float], int]:
    """``selection`` re-picked among its first ``len(scores)`` candidates (those a reader
    scored, ``scores`` its logits in this order) by ``weights`` over the selector's and the
    reader's logits (:func:`~rag.answer.gate.pick_order`): ``(selection, scores, moved)``, the
    answer composed from the re-ranked candidates (the others keep their places after them),
    the scores in that order, and the selector's 0-based rank of the new pick; the same
    ``selection`` and scores and 0 when the order does not change."""
    order = pick_order([c.probability for c in selection.ranked], scores, weights)
    if order == sorted(order):
        return selection, list(scores), 0
    ranked = [selection.ranked[i] for i in order] + list(selection.ranked[len(order):])
    return selector.compose(query, ranked), [scores[i] for i in order], order[0]


@dataclass(frozen=True, slots=True)
class Answering:
    """What the answer stage made of one question: the answer chosen (None: no candidate
    sentence), the reader's scores of the candidates read in the pick's order (None: not read)
    and the gate's verdict (None: no gate)."""

    selection: Selection | None
    reading: ReaderScores | None = None
    verdict: GateVerdict | None = None


class AnswerStage:
    """Selection, reading and the gate for the pipeline (see the module).

    ``gate`` None answers on the floors alone; ``readers`` maps a language to its reader (a
    language without one, or without a reader model in the gate, is not read);
    ``in_language(hit, lang)`` gives the passage to read for a hit (its sibling translation in
    ``lang`` when there is one); ``embed_answer(text)`` the float32 (dim,) L2-normalised vector
    of an answer text embedded as a passage; ``lock`` is held around each reader call (the
    encoder's: the onnxruntime sessions take turns on the cores).
    """

    def __init__(self, selector: AnswerSelector, gate: GateModels | None,
                 readers: Mapping[str, Reader], idf: Idf,
                 in_language: Callable[[Hit, str], Passage],
                 embed_answer: Callable[[str], np.ndarray], lock: threading.Lock) -> None:
        self.selector = selector
        self.gate = gate
        self.readers = dict(readers)
        self.idf = idf
        self._in_language = in_language
        self._embed_answer = embed_answer
        self._lock = lock

    def reads(self, lang: str) -> bool:
        """Whether questions in ``lang`` are read (a reader, and a reader model in the gate)."""
        return lang in self.readers and self.gate is not None and self.gate.reads(lang)

    def run(self, query: str, lang: str, vector: np.ndarray, hits: list[Hit], floor: float,
            trace: Trace, style: QuestionStyle = TYPED) -> Answering:
        """Select, read where :meth:`reads`, then the gate's verdict where there is a gate,
        each recorded as its stage in ``trace``. ``vector`` is the query's float32 (dim,);
        ``hits`` non-empty, best first; ``floor`` the language's (the gate's ``over_floor``)."""
        selection = self.select(query, lang, hits, trace)
        reading = unread = None
        if self.reads(lang):
            unread = self.gate.verdict(gate_features(hits, selection, floor, None, style), lang,
                                       can_read=True)
            if unread is None:
                selection, reading = self.read_stage(query, lang, selection, trace)
            else:  # whatever the reader says, the gate refuses: not read (issue 42)
                trace.add("reader", "skipped", f"not read: the gate's probability is at most "
                                               f"{unread.probability:.3f} whatever the reader "
                                               f"reads, under the hedge threshold "
                                               f"{unread.hedge_threshold:.3f}")
        if self.gate is None:
            return Answering(selection, reading)
        with trace.timed("answerability_gate") as stage:
            verdict = unread or self.verdict(query, lang, vector, hits, floor, selection, reading,
                                             style)
            stage.decision, stage.detail = verdict.decision, verdict.detail
        return Answering(selection, reading, verdict)

    def select(self, query: str, lang: str, hits: list[Hit], trace: Trace) -> Selection | None:
        """The answer chosen across ``hits`` (``select_answer`` stage), None when no hit has
        text."""
        with trace.timed("select_answer") as stage:
            selection = self.selector.select(query, lang, hits,
                                             lambda hit: self._in_language(hit, lang), self.idf)
            stage.decision = "chosen" if selection else "none"
            stage.detail = selection.detail if selection else "no text"
        return selection

    def read(self, query: str, selection: Selection | None, lang: str) -> ReaderScores:
        """``lang``'s reader's scores of ``selection``'s best ``reader_top_k`` candidates (one
        call, under the lock)."""
        k = self.gate.reader_top_k if self.gate is not None else READER_TOP_K
        texts = [c.text for c in (selection.ranked[:k] if selection else ())]
        if not texts:
            return reader_signals([])
        with self._lock:
            return reader_signals(self.readers[lang].score(query, texts))

    def repick(self, query: str, selection: Selection | None, reading: ReaderScores,
               lang: str) -> tuple[Selection | None, ReaderScores, int]:
        """:func:`repick` with ``lang``'s weights from the gate file (unchanged without them):
        ``(selection, reading, moved)``, the reading in the new order."""
        weights = None if self.gate is None else self.gate.pick_weights(lang)
        if selection is None or weights is None or not reading.scores:
            return selection, reading, 0
        picked, scores, moved = repick(self.selector, query, selection, reading.scores, weights)
        return picked, reading if picked is selection else reader_signals(scores), moved

    def read_stage(self, query: str, lang: str, selection: Selection | None,
                   trace: Trace) -> tuple[Selection | None, ReaderScores]:
        """:meth:`read` then :meth:`repick`, recorded as the ``reader`` stage."""
        with trace.timed("reader") as stage:
            reading = self.read(query, selection, lang)
            selection, reading, moved = self.repick(query, selection, reading, lang)
            stage.decision = ("nothing to read" if not reading.scores
                              else "re-picked" if moved else "read")
            stage.detail = f"{reading.describe()} ({self.readers[lang].name})"
            if moved:
                stage.detail += f"; re-picked the selector's no. {moved + 1}: {selection.detail}"
        return selection, reading

    def verdict(self, query: str, lang: str, vector: np.ndarray, hits: list[Hit], floor: float,
                selection: Selection | None, reading: ReaderScores | None,
                style: QuestionStyle = TYPED) -> GateVerdict:
        """The gate's verdict (:meth:`GateModels.verdict`): the answer text is embedded for
        ``answer_cosine`` only when the screen is not sure or a reader model decides."""
        features = gate_features(hits, selection, floor, None, style)
        verdict = None if reading is not None else self.gate.verdict(features, lang)
        if verdict is None:
            cosine = self.answer_cosine(vector, selection)
            verdict = self.gate.verdict(replace(features, answer_cosine=cosine), lang, reading,
                                        can_read=reading is not None)
        return verdict

    def answer_cosine(self, query_vector: np.ndarray, selection: Selection | None) -> float:
        """Cosine between ``query_vector`` (float32 (dim,), L2-normalised) and the vector of
        ``selection.text`` embedded as a passage; 0.0 without a selection."""
        if selection is None:
            return 0.0
        return float(self._embed_answer(selection.text) @ query_vector)
