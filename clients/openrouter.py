"""OpenRouter's OpenAI-compatible chat completions (``POST {base_url}/chat/completions``): the
chat model behind generative answers (:class:`rag.prompt.Generator`).

One attempt per call, JSON mode, temperature 0: transport failures are not retried, so the user
gets the extractive answer at once instead of waiting seconds more (``rag.generative``). Every
failure is a ``rag.errors.ServiceError("openrouter", reason, detail)``.

Settings: ``OPENROUTER_API_KEY``, ``OPENROUTER_BASE_URL``, ``OPENROUTER_MODEL``,
``OPENROUTER_TIMEOUT_S``, ``OPENROUTER_MAX_PASSAGES``, ``OPENROUTER_MAX_TOKENS``. Try it without
OpenRouter: ``python -m standins.openai --port 8092 --api-key dev-key`` then
``OPENROUTER_API_KEY=dev-key OPENROUTER_BASE_URL=http://127.0.0.1:8092/api/v1``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from clients.http import ServiceClient
from rag.errors import ServiceError
from rag.prompt import MAX_PASSAGES, Completion
from rag.settings import bounded, settings_from_env, wire_text

SERVICE = "openrouter"


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
    # Top retrieved passages put in the prompt (rag.prompt.MAX_PASSAGES).
    max_passages: int = bounded(MAX_PASSAGES, 1)
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

    The :class:`rag.prompt.Generator` of generative answers; one attempt per call (see the
    module docstring). Use ``async with OpenRouterClient(s) as c``
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
