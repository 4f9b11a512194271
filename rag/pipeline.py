"""The question pipeline: input guard → language → embed → search → relevance guard → answer →
grounding guard, each stage timed into the trace. Synchronous and thread-safe; async front ends
call :meth:`Pipeline.ask` through ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import threading

from rag.encoders import Encoder, load_encoder
from rag.extractive import extract_answer
from rag.guards import check_grounding, check_input, check_relevance
from rag.index import PassageIndex
from rag.language import detect_language
from rag.retrieval import retrieve
from rag.settings import RagSettings
from rag.types import LANGUAGES, Citation, Hit, Passage, Result, Status, Trace

log = logging.getLogger(__name__)

EXCERPT_CHARS = 200


def excerpt(text: str, n_chars: int = EXCERPT_CHARS) -> str:
    """The first ``n_chars`` of ``text``, cut at a word boundary with an ellipsis."""
    if len(text) <= n_chars:
        return text
    cut = text[:n_chars].rsplit(" ", 1)[0]
    return cut + "…"


class Pipeline:
    """Answers one question at a time from the index; see the module docstring for the stages."""

    def __init__(self, settings: RagSettings, encoder: Encoder, index: PassageIndex) -> None:
        self.settings = settings
        self.encoder = encoder
        self.index = index
        self._encode_lock = threading.Lock()  # encoders hold native state; one call at a time

    @classmethod
    def from_settings(cls, settings: RagSettings) -> Pipeline:
        """Load the configured encoder and index.

        Raises:
            EncoderUnavailableError, IndexNotFoundError, EncoderMismatchError.
        """
        encoder = load_encoder(settings.encoder)
        index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name)
        return cls(settings, encoder, index)

    def encode_query(self, text: str):
        """float32 (dim,) L2-normalised query vector."""
        with self._encode_lock:
            return self.encoder.encode_queries([text])[0]

    def ask(self, query: str, lang: str | None = None, hint_lang: str | None = None) -> Result:
        """Answer ``query`` or refuse.

        Args:
            query: the user's question (typed or transcribed).
            lang: explicit language (en/hi/gu/te): hard filter on passages and picks the floor.
            hint_lang: detected language from speech-to-text: overrides script detection, soft
                bonus only.
        Returns:
            A :class:`Result`; never raises (unexpected failures give ``Status.ERROR``).
        """
        trace = Trace()
        try:
            return self._ask(query, lang, hint_lang, trace)
        except Exception as exc:  # the one place a failure becomes a result, with its trace
            log.exception("pipeline error query_chars=%d", len(query or ""))
            return Result(Status.ERROR, query, lang or hint_lang or "en",
                          message=f"{type(exc).__name__}: {exc}", trace=trace)

    def _ask(self, query: str, lang: str | None, hint_lang: str | None, trace: Trace) -> Result:
        s = self.settings
        with trace.timed("input_guard") as stage:
            verdict = check_input(query, s)
            stage.decision = "passed" if verdict.is_ok else "refused"
            stage.detail = f"{verdict.reason}: {verdict.detail}"
        text = verdict.text
        with trace.timed("language") as stage:
            is_explicit = lang is not None
            if is_explicit:
                query_lang, how = lang, "explicit"
            elif hint_lang is not None:
                query_lang, how = hint_lang, "speech-to-text"
            else:
                query_lang, how = detect_language(text), "script"
            if query_lang not in LANGUAGES:
                raise ValueError(f"language {query_lang!r} not in {LANGUAGES}")
            stage.decision, stage.detail = query_lang, how
        if not verdict.is_ok:
            return Result(Status.REFUSED_BAD_INPUT, text, query_lang,
                          message=f"bad input: {verdict.reason} ({verdict.detail})", trace=trace)

        with trace.timed("embed") as stage:
            vector = self.encode_query(text)
            stage.detail = f"{self.encoder.name}, dim {vector.shape[0]}"
        with trace.timed("search") as stage:
            hits = retrieve(self.index, vector, query_lang, s.top_k, is_explicit=is_explicit,
                            language_bonus=s.language_bonus, pool_factor=s.pool_factor)
            stage.decision = f"{len(hits)} hits"
            stage.detail = ", ".join(f"{h.passage.id} {h.score:.3f}" for h in hits[:3])
        top = hits[0] if hits else None
        with trace.timed("relevance_guard") as stage:
            relevance = check_relevance(top.score if top else None, query_lang, s)
            stage.decision = "passed" if relevance.is_ok else "refused"
            stage.detail = relevance.detail
        base = dict(query=text, lang=query_lang, top_score=relevance.top_score,
                    floor=relevance.floor, trace=trace)
        if not relevance.is_ok:
            return Result(Status.REFUSED_NO_MATCH, message=relevance.detail, **base)

        with trace.timed("answer") as stage:
            sibling = self._sibling(top, query_lang)
            answer = extract_answer(text, query_lang, top, sibling)
            stage.decision = "extractive"
            via = f" via sibling of {top.passage.id}" if sibling else ""
            stage.detail = f"from {answer.source.id}{via}, support {answer.support:.2f}"
        with trace.timed("grounding_guard") as stage:
            sources = [top.passage.text] + ([sibling.text] if sibling else [])
            grounding = check_grounding(answer.text, sources, s)
            stage.decision = "passed" if grounding.is_grounded else "refused"
            stage.detail = grounding.detail
        if not grounding.is_grounded:
            return Result(Status.REFUSED_UNGROUNDED, message=grounding.detail, **base)
        citations = self._citations(top, sibling, vector)
        return Result(Status.ANSWERED, answer=answer.text, answer_lang=answer.source.lang,
                      citations=citations, is_low_confidence=relevance.is_low_confidence, **base)

    def _sibling(self, top: Hit, lang: str) -> Passage | None:
        """The top passage's translation in the query's language, if it is in the corpus."""
        if top.passage.lang == lang:
            return None
        label = self.index.label_of(top.passage.sibling_id(lang))
        return None if label is None else self.index.passages[label]

    def _citations(self, top: Hit, sibling: Passage | None, vector) -> list[Citation]:
        citations = []
        if sibling is not None:
            label = self.index.label_of(sibling.id)
            score = float(self.index.vectors([label])[0] @ vector)
            citations.append(Citation(sibling.id, sibling.lang, score, excerpt(sibling.text)))
        p = top.passage
        citations.append(Citation(p.id, p.lang, top.score, excerpt(p.text)))
        return citations
