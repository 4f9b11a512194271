"""Generative answers through OpenRouter's OpenAI-compatible chat completions, never ungrounded.

Flow of :func:`ask_generative` (each step is a trace stage)::

    prepare (input guard … relevance guard, in a thread)
    → generate         POST {base_url}/chat/completions with the top passages and their ids;
                       strict JSON {"answer": str, "citations": [passage ids], "confidence": 0..1}
    → generate_retry   once, only when the output is malformed (not JSON / wrong schema)
    → citations        ids that were not supplied (invented, out of range) are dropped
    → grounding_guard  answer vs the cited passages: overlap >= 0.231, else cosine >= 0.794;
                       and every number in the answer must occur in them (a generated "in
                       1994" passed cosine 0.807 against a passage that has no year)
    → fallback         on any failure: the extractive answer (which has its own grounding guard
                       and refuses if that fails); ``decision`` is the reason code

Fallback reasons (``Stage("fallback", reason, detail)``): the client's ``ServiceError.reason``
(``timeout``, ``rate_limited``, ``server_error``, ``unauthorized``, ``bad_request``,
``network``, ``malformed``), ``malformed_output`` (twice), ``empty_answer``,
``no_valid_citations``, ``ungrounded`` and ``wrong_language`` (the answer's script is not the
question's language: the extractive answer can show the passage's translation instead).
Transport failures are not retried: the user gets the extractive answer at once instead of
waiting seconds more.

Settings: ``OPENROUTER_API_KEY``, ``OPENROUTER_BASE_URL``, ``OPENROUTER_MODEL``,
``OPENROUTER_TIMEOUT_S``, ``OPENROUTER_MAX_PASSAGES``, ``OPENROUTER_MAX_TOKENS``. Try it without
OpenRouter: ``python -m standins.openai --port 8092 --api-key dev-key`` then
``OPENROUTER_API_KEY=dev-key OPENROUTER_BASE_URL=http://127.0.0.1:8092/api/v1``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
import numpy as np

from clients.http import ServiceClient
from rag.errors import ServiceError
from rag.guards import GroundingVerdict, check_grounding
from rag.language import dominant_language
from rag.pipeline import Pipeline, Prepared
from rag.settings import bounded, settings_from_env, wire_text
from rag.text import clean_text, excerpt, split_sentences, tokenize
from rag.types import Citation, FallbackCode, Passage, Result, Status, Trace

log = logging.getLogger(__name__)

SERVICE = "openrouter"
LANGUAGE_NAMES = {"en": "English", "hi": "Hindi (Devanagari script)",
                  "gu": "Gujarati (Gujarati script)", "te": "Telugu (Telugu script)"}


@dataclass(frozen=True, slots=True)
class OpenRouterSettings:
    """OpenRouter client settings; environment variables ``OPENROUTER_<FIELD>``."""

    # Bearer key (openrouter.ai/keys). Empty: every request fails as ``unauthorized`` and
    # generative mode falls back to extractive answers.
    api_key: str = wire_text("")
    base_url: str = "https://openrouter.ai/api/v1"
    # Multilingual (en/hi/gu/te), supports response_format json_object, low latency and cost.
    model: str = "openai/gpt-4o-mini"
    # Seconds per network operation; a chat user should not wait longer for one answer.
    timeout_s: float = bounded(20.0, 0.1)
    # Top retrieved passages put in the prompt (the pipeline's top_k is 5).
    max_passages: int = bounded(5, 1)
    # Cap on generated tokens: a short answer plus ids; a truncated reply is malformed JSON.
    max_tokens: int = bounded(600, 1)
    # OpenRouter attribution header (optional, shown on openrouter.ai rankings).
    app_title: str = wire_text("VOICE-RAG bot")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None,
                 prefix: str = "OPENROUTER_") -> OpenRouterSettings:
        """Read ``{prefix}API_KEY``, ``{prefix}BASE_URL``, ``{prefix}MODEL``, ``{prefix}TIMEOUT_S``,
        ``{prefix}MAX_PASSAGES``, ... from ``env`` (default ``os.environ``)."""
        return settings_from_env(cls, os.environ if env is None else env, prefix)


# ----- client ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Completion:
    """One chat completion. ``content`` is the assistant text ("" when the model sent none);
    ``elapsed_ms`` is the request's wall time; token counts are None when not reported."""

    content: str
    model: str
    elapsed_ms: float
    request_id: str | None = None
    finish_reason: str | None = None
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None


def _error_message(response: httpx.Response) -> str:
    """OpenRouter's ``{"error": {"code", "message"}}`` as ``code: message``, else the body start."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict) and err.get("message"):
        return f"{err.get('code', '')}: {err['message']}".strip(": ")[:300]
    return str(body)[:200]


def _reason_for_status(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    if status in (401, 402, 403):  # 402: out of credits
        return "unauthorized"
    return "bad_request"


class OpenRouterClient(ServiceClient):
    """Async client for ``POST {base_url}/chat/completions``; owns one ``httpx.AsyncClient``.

    One attempt per call (see the module docstring). Use ``async with OpenRouterClient(s) as c``
    or call :meth:`aclose`. ``transport`` is for custom networking.
    """

    def __init__(self, settings: OpenRouterSettings, *,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {settings.api_key}", "X-Title": settings.app_title}
        super().__init__(settings.base_url, settings.timeout_s, headers, transport)
        self.settings = settings

    async def complete(self, messages: list[dict[str, str]]) -> Completion:
        """One JSON-mode chat completion at temperature 0.

        Args:
            messages: OpenAI chat messages, ``[{"role": "system"|"user"|"assistant",
                "content": str}, ...]``.
        Returns:
            A :class:`Completion`.
        Raises:
            ServiceError: ``("openrouter", reason, detail)``; reason is ``unauthorized`` (no key,
                401/402/403), ``rate_limited`` (429, Retry-After in the detail), ``timeout``
                (client timeout or 408), ``server_error`` (5xx), ``bad_request`` (other 4xx),
                ``network`` or ``malformed`` (body is not a chat completion).
        """
        s = self.settings
        if not s.api_key:
            raise ServiceError(SERVICE, "unauthorized", "no API key: set OPENROUTER_API_KEY")
        payload = {"model": s.model, "messages": messages, "temperature": 0,
                   "max_tokens": s.max_tokens, "response_format": {"type": "json_object"}}
        start = time.perf_counter()
        try:
            response = await self._client.post("/chat/completions", json=payload)
        except httpx.TimeoutException as exc:
            raise ServiceError(SERVICE, "timeout",
                               f"{type(exc).__name__} after {s.timeout_s:g} s") from exc
        except httpx.TransportError as exc:
            raise ServiceError(SERVICE, "network", f"{type(exc).__name__}: {exc}") from exc
        elapsed_ms = round((time.perf_counter() - start) * 1000, 3)
        status = response.status_code
        if status >= 400:
            detail = f"HTTP {status} {_error_message(response)}"
            if response.headers.get("retry-after"):
                detail += f"; Retry-After {response.headers['retry-after']} s"
            if status in (401, 403):
                detail += "; check OPENROUTER_API_KEY"
            raise ServiceError(SERVICE, _reason_for_status(status), detail)
        try:
            body = response.json()
        except ValueError as exc:
            raise ServiceError(SERVICE, "malformed", f"HTTP {status} body is not JSON: "
                               f"{response.text[:120]!r}") from exc
        if isinstance(body, dict) and isinstance(body.get("error"), dict):  # error inside a 200
            code = body["error"].get("code")
            reason = _reason_for_status(code) if isinstance(code, int) else "server_error"
            raise ServiceError(SERVICE, reason,
                               f"HTTP {status} error body {_error_message(response)}")
        try:
            choice = body["choices"][0]
            content = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ServiceError(SERVICE, "malformed",
                               f"no choices[0].message in {str(body)[:120]}") from exc
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return Completion(
            content=content if isinstance(content, str) else json.dumps(content),
            model=str(body.get("model") or s.model),
            elapsed_ms=elapsed_ms,
            request_id=body.get("id"),
            finish_reason=choice.get("finish_reason"),
            n_prompt_tokens=usage.get("prompt_tokens"),
            n_completion_tokens=usage.get("completion_tokens"),
        )


# ----- prompt and validation -------------------------------------------------------------------
SYSTEM_PROMPT = """You answer questions using ONLY the numbered passages the user supplies.
Rules:
- Use only facts stated in the passages. No outside knowledge, no guesses.
- Answer in {language}, in one to three short sentences.
- Cite the id of every passage you used, exactly as written in its id="..." attribute.
- If the passages do not answer the question, set "answer" to "" and "citations" to [].
- Reply with ONLY one JSON object, no code fences, no other text:
  {{"answer": "<string>", "citations": ["<passage id>", ...], "confidence": <number 0 to 1>}}"""


def build_messages(query: str, lang: str, passages: list[Passage]) -> list[dict[str, str]]:
    """Chat messages: the rules (answer language ``lang``) and the question with ``passages``,
    each as ``<passage id="en-1-0" n="1" lang="en">text</passage>``."""
    blocks = [
        f'<passage id="{p.id}" n="{n}" lang="{p.lang}">\n'
        f'{p.text.replace("</passage", "</ passage")}\n</passage>'
        for n, p in enumerate(passages, 1)
    ]
    user = "Passages:\n" + "\n".join(blocks) + f"\n\nQuestion: {query}"
    system = SYSTEM_PROMPT.format(language=LANGUAGE_NAMES.get(lang, "English"))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def retry_messages(
    messages: list[dict[str, str]], bad_content: str, why: str
) -> list[dict[str, str]]:
    """``messages`` plus the malformed reply and a correction asking for the JSON object only."""
    return messages + [
        {"role": "assistant", "content": bad_content[:2000]},
        {"role": "user", "content": f"That reply was invalid: {why}. Reply again with ONLY the "
                                    'JSON object {"answer": string, "citations": [passage ids], '
                                    '"confidence": number between 0 and 1}.'},
    ]


class MalformedOutputError(ValueError):
    """The model's reply is not the JSON object the prompt asks for; ``str()`` says why."""


@dataclass(frozen=True, slots=True)
class Generation:
    """A schema-valid reply. ``citations`` are as the model wrote them (ids, or 1-based passage
    numbers as int), duplicates removed; ``confidence`` is in [0, 1]."""

    answer: str
    citations: list[str | int]
    confidence: float


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def parse_generation(content: str) -> Generation:
    """Validate ``content`` as ``{"answer": str, "citations": [str | int], "confidence": number in
    [0, 1]}``; other keys are ignored and one surrounding ```json fence is tolerated.

    Raises:
        MalformedOutputError: not a JSON object, a key missing, or a value of the wrong type.
    """
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not text:
        raise MalformedOutputError("empty reply")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedOutputError(f"not JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(data, dict):
        raise MalformedOutputError(f"JSON {type(data).__name__}, expected an object")
    missing = [k for k in ("answer", "citations", "confidence") if k not in data]
    if missing:
        raise MalformedOutputError(f"missing key(s) {', '.join(missing)}")
    answer, citations, confidence = data["answer"], data["citations"], data["confidence"]
    if not isinstance(answer, str):
        raise MalformedOutputError(f"answer is {type(answer).__name__}, expected string")
    if not isinstance(citations, list) or not all(
            isinstance(c, str | int) and not isinstance(c, bool) for c in citations):
        raise MalformedOutputError("citations must be a list of passage ids")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) \
            or not 0.0 <= confidence <= 1.0:
        raise MalformedOutputError(f"confidence {confidence!r} is not a number in [0, 1]")
    unique = list(dict.fromkeys(c.strip() if isinstance(c, str) else c for c in citations))
    return Generation(clean_text(answer, nfkc=False), unique, float(confidence))


def filter_citations(
    citations: list[str | int], supplied: list[Passage]
) -> tuple[list[Passage], list[str]]:
    """Keep citations of supplied passages, by id or by 1-based number (int or digit string).

    Returns:
        (kept passages in citation order, dropped citations as ``"<citation> (<why>)"``).
    """
    by_id = {p.id: p for p in supplied}
    kept: list[Passage] = []
    dropped: list[str] = []
    for c in citations:
        # isdecimal, not isdigit: "¹" and "①" are digits that int() rejects
        number = c if isinstance(c, int) else (int(c) if c.isdecimal() else None)
        if number is not None:
            passage = supplied[number - 1] if 1 <= number <= len(supplied) else None
            why = f"out of range 1..{len(supplied)}"
        else:
            passage = by_id.get(c)
            why = "not supplied"
        if passage is None:
            dropped.append(f"{c} ({why})")
        elif passage not in kept:
            kept.append(passage)
    return kept, dropped


# ----- the answer stage ------------------------------------------------------------------------
class _Fallback(Exception):
    """Internal: the generative answer cannot be shown; ``reason`` is the fallback code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = FallbackCode(reason), detail


async def _request(client: OpenRouterClient, messages: list[dict[str, str]], trace: Trace,
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
            completion = await client.complete(messages)
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


async def _generate(client: OpenRouterClient, prepared: Prepared,
                    passages: list[Passage]) -> Generation:
    """Request, and exactly one retry when the reply is malformed."""
    messages = build_messages(prepared.query, prepared.lang, passages)
    try:
        return await _request(client, messages, prepared.trace, "generate")
    except MalformedOutputError as exc:
        why, bad_content = exc.args[0], exc.args[1]
    log.info("generative retry reason=malformed why=%s", why)
    try:
        return await _request(client, retry_messages(messages, bad_content, why),
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
    let such answers through (measured: "It is made by Nintendo and sold only in Japan." has
    overlap 0.400 with the Xbox 360 passage en-331047-0, and "...designed by Sony in 1994..."
    cosine 0.807). Names are compared case-insensitively with the sources' tokens; Indic
    scripts have no case, so only their numbers are checked.
    """
    known_numbers = set().union(*(_numbers(s) for s in sources)) if sources else set()
    known_words = {t for s in sources for t in tokenize(s)}
    novel_names = {n for n in _names(answer) if n.lower() not in known_words}
    return sorted(_numbers(answer) - known_numbers) + sorted(novel_names)


def _ground(pipeline: Pipeline, answer: str, cited: list[Passage],
            query_vector: np.ndarray) -> tuple[GroundingVerdict, list[float]]:
    """Grounding verdict against the cited passages (vectors only encoded if overlap fails) and
    each cited passage's cosine to the query. Blocking: run in a thread."""
    texts = [p.text for p in cited]
    source_vectors = pipeline.index.vectors([pipeline.index.label_of(p.id) for p in cited])
    verdict = check_grounding(answer, texts, pipeline.settings)
    if not verdict.is_grounded:
        answer_vector = pipeline.encode_passages([answer])[0]
        verdict = check_grounding(answer, texts, pipeline.settings, answer_vector, source_vectors)
    return verdict, [float(v @ query_vector) for v in source_vectors]


async def _answer(pipeline: Pipeline, client: OpenRouterClient, prepared: Prepared) -> Result:
    """Generate, filter citations, ground; raises _Fallback when the answer cannot be shown."""
    trace = prepared.trace
    passages = [h.passage for h in prepared.hits[: max(1, client.settings.max_passages)]]
    generation = await _generate(client, prepared, passages)
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
        verdict, scores = await asyncio.to_thread(_ground, pipeline, generation.answer, cited,
                                                  prepared.vector)
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
    return prepared.result(Status.ANSWERED, answer=generation.answer, answer_lang=answer_lang,
                           citations=citations, mode="generative")


async def ask_generative(
    pipeline: Pipeline,
    client: OpenRouterClient,
    query: str,
    lang: str | None = None,
    hint_lang: str | None = None,
) -> Result:
    """Answer ``query`` with a generated, cited, grounded answer, else extractively, else refuse.

    Args:
        pipeline: retrieval, guards and the extractive fallback.
        client: the OpenRouter client (its settings give the model and ``max_passages``).
        query, lang, hint_lang: as :meth:`Pipeline.ask`.
    Returns:
        A :class:`Result`: ``mode="generative"`` when the generated text is shown (its citations
        are the surviving cited passages with their cosine to the query), ``mode="extractive"``
        after a fallback (trace stage ``fallback``, decision = reason). Never raises
        (unexpected failures give ``Status.ERROR``); cancellation propagates.
    """
    trace = Trace()
    start = time.perf_counter()
    try:
        prepared = await asyncio.to_thread(pipeline.prepare, query, lang, hint_lang, trace)
        if isinstance(prepared, Result):
            return prepared
        try:
            result = await _answer(pipeline, client, prepared)
        except _Fallback as fb:
            trace.add("fallback", fb.reason.value, f"answering extractively: {fb.detail}")
            log.warning("generative fallback reason=%s detail=%s", fb.reason, fb.detail)
            result = await asyncio.to_thread(pipeline.answer_extractive, prepared)
            result.fallback = fb.reason
        log.info("generative done status=%s mode=%s n_citations=%d took_ms=%.0f",
                 result.status.value, result.mode, len(result.citations),
                 (time.perf_counter() - start) * 1000)
        return result
    except Exception as exc:  # the one place a failure becomes a result, with its trace
        return pipeline.error_result(exc, query, lang or hint_lang, trace)


def run_generative_cli(pipeline: Pipeline, query: str, lang: str | None = None,
                       settings: OpenRouterSettings | None = None) -> Result:
    """Blocking wrapper for ``python -m rag ask --generative``: one question with a client built
    from ``OPENROUTER_*`` variables (or ``settings``). Must not be called from a running loop."""
    settings = settings or OpenRouterSettings.from_env()
    if not settings.api_key:
        log.warning("OPENROUTER_API_KEY is not set: generative mode will fall back to extractive")

    async def _run() -> Result:
        async with OpenRouterClient(settings) as client:
            return await ask_generative(pipeline, client, query, lang)

    return asyncio.run(_run())
