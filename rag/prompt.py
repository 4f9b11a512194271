"""What goes to the chat model and what comes back, for the generative answer stage
(:mod:`rag.generative`). Pure: no I/O.

- The prompt: :func:`build_messages` (rules, answer language, the top passages with their ids)
  and :func:`retry_messages` (one correction after a malformed reply).
- The contract a chat-model client fulfils, :class:`Generator` (``complete(messages) ->
  Completion``, or ``ServiceError``); ``clients.openrouter.OpenRouterClient`` is the real one.
- Validation of the model's strict JSON reply (:func:`parse_generation`) and of its citations
  against the passages supplied (:func:`filter_citations`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Protocol

from rag.text import clean_text
from rag.types import Passage

MAX_PASSAGES = 5
"""Top retrieved passages put in the prompt by default (the pipeline's ``top_k`` is 5);
``OPENROUTER_MAX_PASSAGES`` overrides it."""
LANGUAGE_NAMES = {"en": "English", "hi": "Hindi (Devanagari script)",
                  "gu": "Gujarati (Gujarati script)", "te": "Telugu (Telugu script)"}
"""How the prompt names each answer language."""


@dataclass(frozen=True, slots=True)
class Completion:
    """One chat completion. ``content`` is the assistant's raw text ("" when the model sent
    none); ``elapsed_ms`` is the request's wall time; token counts are None when not reported.
    Everything but ``content`` is for the trace."""

    content: str
    model: str
    elapsed_ms: float
    request_id: str | None = None
    finish_reason: str | None = None
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None


class Generator(Protocol):
    """A chat model the generative stage can ask: ``clients.openrouter.OpenRouterClient``, or
    any object with this method (tests script one)."""

    async def complete(self, messages: list[dict[str, str]]) -> Completion:
        """One JSON-mode completion of OpenAI-style ``messages`` (``[{"role": "system" | "user"
        | "assistant", "content": str}, ...]``).

        Raises:
            ServiceError: the service failed; its ``reason`` becomes the fallback code
                (``timeout``, ``rate_limited``, ``server_error``, ``bad_request``,
                ``unauthorized``, ``network``, ``malformed``).
        """
        ...


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
