"""The generative answer stage: a chat model's answer, cited and grounded, else extractive.

Flow of :func:`ask_generative` (each step is a trace stage)::

    prepare (input guard … relevance guard, in a thread)
    → generate         the model (Generator.complete) with the top passages and their ids;
                       strict JSON {"answer": str, "citations": [passage ids], "confidence": 0..1}
    → generate_retry   once, only when the output is malformed (not JSON / wrong schema)
    → citations        ids that were not supplied (invented, out of range) are dropped
    → grounding_guard  answer vs the cited passages: overlap >= 0.231, else cosine >= 0.794;
                       and every number in the answer must occur in them (a generated "in
                       1994" passed the cosine threshold against a passage that has no year)
    → fallback         on any failure: the extractive answer (which has its own grounding guard
                       and refuses if that fails); ``decision`` is the reason code

Fallback reasons (``Stage("fallback", reason, detail)``, ``Result.fallback``): the model's
``ServiceError.reason`` (``timeout``, ``rate_limited``, ``server_error``, ``unauthorized``,
``bad_request``, ``network``, ``malformed``), ``malformed_output`` (twice), ``empty_answer``,
``no_valid_citations``, ``ungrounded`` and ``wrong_language`` (the answer's script is not the
question's language: the extractive answer can show the passage's translation instead).
Transport failures are not retried: the user gets the extractive answer at once instead of
waiting seconds more.

The model is any :class:`rag.prompt.Generator` (``clients.openrouter.OpenRouterClient`` in the
bot); front ends reach this stage through :class:`rag.answering.Answerer`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from concurrent.futures import Executor
from functools import partial

import numpy as np

from rag.errors import ServiceError
from rag.guards import GroundingVerdict
from rag.language import dominant_language
from rag.pipeline import Pipeline
from rag.prepared import Prepared
from rag.prompt import (
    MAX_PASSAGES,
    Generation,
    Generator,
    MalformedOutputError,
    build_messages,
    filter_citations,
    parse_generation,
    retry_messages,
)
from rag.text import excerpt, split_sentences, tokenize
from rag.types import Citation, FallbackCode, Passage, Result, Status, Trace, Turn

log = logging.getLogger(__name__)


class _Fallback(Exception):
    """Internal: the generative answer cannot be shown; ``reason`` is the fallback code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = FallbackCode(reason), detail


async def _request(generator: Generator, messages: list[dict[str, str]], trace: Trace,
                   stage_name: str) -> Generation:
    """One completion, validated, as one trace stage (decision ``ok``, ``malformed`` or the
    service's failure reason).

    Raises:
        _Fallback: the service failed (reason from ServiceError).
        MalformedOutputError: ``args`` are (why, the bad content).
    """
    failure: Exception | None = None
    with trace.timed(stage_name) as stage:  # raise after the block: timed() would relabel it
        try:
            completion = await generator.complete(messages)
        except ServiceError as exc:
            stage.decision, stage.detail = exc.reason, str(exc)
            failure = _Fallback(exc.reason, exc.detail)
        else:
            head = (f"model {completion.model}, request {completion.elapsed_ms:.0f} ms, "
                    f"finish {completion.finish_reason}, tokens {completion.n_prompt_tokens}"
                    f"+{completion.n_completion_tokens}")
            try:
                generation = parse_generation(completion.content)
            except MalformedOutputError as exc:
                stage.decision = "malformed"
                stage.detail = f"{head}; {exc}; reply {completion.content[:80]!r}"
                failure = MalformedOutputError(str(exc), completion.content)
            else:
                stage.decision = "ok"
                stage.detail = (f"{head}; {len(generation.answer)} chars, citations "
                                f"{generation.citations}, confidence {generation.confidence:.2f}")
    if failure is not None:
        raise failure
    return generation


async def _generate(generator: Generator, prepared: Prepared,
                    passages: list[Passage]) -> Generation:
    """Request, and exactly one retry when the reply is malformed."""
    messages = build_messages(prepared.query, prepared.lang, passages)
    try:
        return await _request(generator, messages, prepared.trace, "generate")
    except MalformedOutputError as exc:
        why, bad_content = exc.args[0], exc.args[1]
    log.info("generative retry reason=malformed why=%s", why)
    try:
        return await _request(generator, retry_messages(messages, bad_content, why),
                              prepared.trace, "generate_retry")
    except MalformedOutputError as exc:
        raise _Fallback("malformed_output", f"twice; last: {exc.args[0]}") from exc


_CITATION_MARK = re.compile(r"\[\d+\]|\b(?:en|hi|gu|te)-\d+-\d+\b")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = re.compile(r"\d+")


def _numbers(text: str) -> set[str]:
    """Digit runs of ``text`` as ASCII (Devanagari/Gujarati/Telugu digits too), with thousands
    commas removed and citation marks (``[2]``, passage ids) ignored: {"1000", "399", "99"}."""
    text = _THOUSANDS.sub("", _CITATION_MARK.sub(" ", text))
    return {"".join(str(int(ch)) for ch in run) for run in _NUMBER.findall(text)}


_NAME = re.compile(r"(?<![\w.])([A-Z][a-zA-Z]{2,})")


def _names(text: str) -> set[str]:
    """Capitalised Latin words that do not start a sentence: likely names ("Sony", "Japan")."""
    names = set()
    for sentence in split_sentences(_CITATION_MARK.sub(" ", text)):
        names.update(m.group(1) for m in _NAME.finditer(sentence) if m.start() > 0)
    return names


def unsupported_facts(answer: str, sources: list[str]) -> list[str]:
    """Numbers and names in ``answer`` that appear in none of ``sources``, sorted.

    A generated answer with a number or a name its passages lack states a fact they do not (a
    price, a year, a maker): the token-overlap and embedding thresholds of the grounding guard
    let such answers through ("It is made by Nintendo and sold only in Japan." against the Xbox
    360 passage en-331047-0, and "...designed by Sony in 1994...": docs/benchmarks.md, "Figures
    behind the code's constants"). Names are compared case-insensitively with the sources'
    tokens; Indic scripts have no case, so only their numbers are checked.
    """
    known_numbers = set().union(*(_numbers(s) for s in sources)) if sources else set()
    known_words = {t for s in sources for t in tokenize(s)}
    novel_names = {n for n in _names(answer) if n.lower() not in known_words}
    return sorted(_numbers(answer) - known_numbers) + sorted(novel_names)


def _ground(pipeline: Pipeline, answer: str, cited: list[Passage],
            query_vector: np.ndarray) -> tuple[GroundingVerdict, list[float]]:
    """Grounding verdict against the cited passages and each cited passage's cosine to the
    query. Blocking: run in a thread."""
    source_vectors = pipeline.passage_vectors(cited)
    verdict = pipeline.ground_generated(answer, cited, source_vectors)
    return verdict, [float(v @ query_vector) for v in source_vectors]


async def _answer(pipeline: Pipeline, generator: Generator, prepared: Prepared,
                  max_passages: int, executor: Executor | None) -> Result:
    """Generate, filter citations, ground; raises _Fallback when the answer cannot be shown."""
    trace = prepared.trace
    passages = [h.passage for h in prepared.hits[: max(1, max_passages)]]
    generation = await _generate(generator, prepared, passages)
    if not generation.answer:
        raise _Fallback("empty_answer", "the model found no answer in the passages "
                        f"(citations {generation.citations})")
    with trace.timed("citations") as stage:
        cited, dropped = filter_citations(generation.citations, passages)
        stage.decision = f"{len(cited)} kept, {len(dropped)} dropped"
        stage.detail = (f"kept {', '.join(p.id for p in cited) or '-'}; "
                        f"dropped {', '.join(dropped) or '-'}")
    if not cited:
        raise _Fallback("no_valid_citations", f"cited {generation.citations}, supplied "
                        f"{', '.join(p.id for p in passages)}")
    with trace.timed("grounding_guard") as stage:
        verdict, scores = await asyncio.get_running_loop().run_in_executor(
            executor, _ground, pipeline, generation.answer, cited, prepared.vector)
        novel = unsupported_facts(generation.answer, [p.text for p in cited])
        is_grounded = verdict.is_grounded and not novel
        numbers = f"; facts not in passages: {', '.join(novel)}" if novel else ""
        stage.decision = "passed" if is_grounded else "refused"
        stage.detail = f"{verdict.detail}{numbers} vs {', '.join(p.id for p in cited)}"
    if not is_grounded:
        raise _Fallback("ungrounded", verdict.detail + numbers)
    # no word in any script ("$80-$250 [1]") cannot be in the wrong language
    answer_lang = dominant_language(generation.answer) or prepared.lang
    if answer_lang != prepared.lang:
        raise _Fallback("wrong_language", f"asked {prepared.lang}, answer script {answer_lang}")
    citations = [Citation(p.id, p.lang, score, excerpt(p.text))
                 for p, score in zip(cited, scores, strict=True)]
    # a hedged question's generated answer is shown hedged too (the gate was not sure)
    return prepared.result(Status.HEDGED if prepared.is_hedged else Status.ANSWERED,
                           answer=generation.answer, answer_lang=answer_lang,
                           citations=citations, mode="generative", **prepared.hedge_fields())


async def ask_generative(
    pipeline: Pipeline,
    generator: Generator,
    query: str,
    lang: str | None = None,
    hint_lang: str | None = None,
    *,
    max_passages: int = MAX_PASSAGES,
    executor: Executor | None = None,
    after: Turn | str | None = None,
) -> Result:
    """Answer ``query`` with a generated, cited, grounded answer, else extractively, else refuse.

    Args:
        pipeline: retrieval, guards and the extractive fallback.
        generator: the chat model (``clients.openrouter.OpenRouterClient`` in the bot).
        query, lang, hint_lang, after: as :meth:`Pipeline.ask` (``after``, the previous turn
            of a conversation, goes to :meth:`Pipeline.prepare`, which reads the follow-up;
            None: ``query`` is read alone).
        max_passages: top retrieved passages put in the prompt (at least 1).
        executor: runs the blocking pipeline steps (retrieval, grounding, the extractive
            fallback), as the extractive path does (the bot's ``BOT_PIPELINE_THREADS`` pool);
            None: the event loop's default executor.
    Returns:
        A :class:`Result`: ``mode="generative"`` when the generated text is shown (its citations
        are the surviving cited passages with their cosine to the query), ``mode="extractive"``
        after a fallback (trace stage ``fallback``, decision = reason). Never raises
        (unexpected failures give ``Status.ERROR``); cancellation propagates.
    """
    trace = Trace()
    start = time.perf_counter()
    loop = asyncio.get_running_loop()
    try:
        prepared = await loop.run_in_executor(
            executor, partial(pipeline.prepare, query, lang, hint_lang, trace, after))
        if isinstance(prepared, Result):
            return prepared
        try:
            result = await _answer(pipeline, generator, prepared, max_passages, executor)
        except _Fallback as fb:
            trace.add("fallback", fb.reason.value, f"answering extractively: {fb.detail}")
            log.warning("generative fallback reason=%s detail=%s", fb.reason, fb.detail)
            result = await loop.run_in_executor(executor, pipeline.answer_extractive, prepared)
            result.fallback = fb.reason
        log.info("generative done status=%s mode=%s n_citations=%d took_ms=%.0f",
                 result.status.value, result.mode, len(result.citations),
                 (time.perf_counter() - start) * 1000)
        return result
    except Exception as exc:  # the one place a failure becomes a result, with its trace
        return pipeline.error_result(exc, query, lang or hint_lang, trace)
