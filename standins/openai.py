"""A local server shaped like OpenRouter's OpenAI-compatible chat completions, for tests and dev.

``POST /chat/completions`` and ``POST /api/v1/chat/completions`` (JSON body with ``model`` and
``messages``; header ``Authorization: Bearer <key>``) answer like https://openrouter.ai does::

    200 {"id": "gen-...", "object": "chat.completion", "model": "...", "choices": [{"index": 0,
         "message": {"role": "assistant", "content": "..."}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": n, "completion_tokens": m, "total_tokens": n + m}}
    401 {"error": {"code": 401, "message": "..."}}   missing or wrong bearer key
    400 {"error": {"code": 400, "message": "..."}}   body not JSON, no model, no messages

What it answers:
1. the next scripted :class:`Reply` queued with :meth:`OpenAIStandin.enqueue`: message content
   (any string, e.g. malformed JSON), an HTTP error (:meth:`Reply.error`, 429 with Retry-After,
   500), a raw body, and/or a delay in seconds (longer than the client's timeout = a timeout);
2. else the default: the first sentence of the first ``<passage id="...">`` in the last user
   message, citing that id, as ``{"answer", "citations", "confidence"}`` JSON.

In tests::

    async with OpenAIStandin(api_key="k") as llm:
        llm.enqueue(Reply("not json"), Reply.answer("The basic Xbox 360 ...", ["en-331047-0"]))
        ... OpenRouterSettings(api_key="k", base_url=llm.base_url) ...
        llm.calls[1].messages

Standalone, to try generative mode without OpenRouter::

    python -m standins.openai --port 8092 --api-key dev-key
    OPENROUTER_API_KEY=dev-key OPENROUTER_BASE_URL=http://127.0.0.1:8092/api/v1 ...
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from standins._server import LoopbackServer

logger = logging.getLogger(__name__)

_PASSAGE = re.compile(r'<passage\s+id="([^"]+)"[^>]*>\s*(.*?)\s*</passage>', re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.?!।॥])\s+")


@dataclass(slots=True)
class Reply:
    """One scripted answer. ``status`` 200 returns ``content`` as the assistant message (or
    ``body`` verbatim when set: a dict as JSON, a str as text); any other status returns ``body``
    (default OpenRouter's error shape). ``delay_s`` seconds pass before answering."""

    content: str = ""
    status: int = 200
    body: dict | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish_reason: str = "stop"

    @classmethod
    def answer(cls, answer: str, citations: list[Any], confidence: float = 0.9, *,
               delay_s: float = 0.0, **extra: Any) -> Reply:
        """A well-formed ``{"answer", "citations", "confidence"}`` reply (plus ``extra`` keys in
        the JSON), sent after ``delay_s`` seconds."""
        content = {"answer": answer, "citations": citations, "confidence": confidence, **extra}
        return cls(json.dumps(content, ensure_ascii=False), delay_s=delay_s)

    @classmethod
    def error(cls, status: int, message: str = "", *, retry_after: float | None = None,
              delay_s: float = 0.0) -> Reply:
        """An error answer in OpenRouter's shape; ``retry_after`` sets Retry-After (seconds)."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(status=status, body={"error": {"code": status,
                                                  "message": message or f"scripted {status}"}},
                   headers=headers, delay_s=delay_s)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One request as the stand-in saw it; ``body`` is None when it was not JSON."""

    path: str
    headers: dict[str, str]
    body: dict | None
    status: int

    @property
    def messages(self) -> list[dict]:
        return list((self.body or {}).get("messages") or [])

    @property
    def prompt(self) -> str:
        """All message contents joined with blank lines."""
        return "\n\n".join(str(m.get("content", "")) for m in self.messages)


def default_content(messages: list[dict]) -> str:
    """The default reply: first sentence of the first supplied passage, citing its id; an empty
    answer when the last user message holds no ``<passage id="...">``."""
    user = next((str(m.get("content", "")) for m in reversed(messages)
                 if m.get("role") == "user" and "<passage" in str(m.get("content", ""))), "")
    match = _PASSAGE.search(user)
    if match is None:
        return json.dumps({"answer": "", "citations": [], "confidence": 0.0})
    passage_id, text = match.group(1), " ".join(match.group(2).split())
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0]
    return json.dumps({"answer": sentence, "citations": [passage_id], "confidence": 0.5},
                      ensure_ascii=False)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


class OpenAIStandin(LoopbackServer):
    """The server; start with ``async with`` (or :meth:`start`/:meth:`stop`), then read
    :attr:`base_url` and :attr:`calls`."""

    def __init__(self, api_key: str = "test-key", host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.api_key = api_key
        self.calls: list[RecordedCall] = []
        self._script: collections.deque[Reply] = collections.deque()

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies, used one per request in order before the default."""
        self._script.extend(replies)

    @property
    def n_pending(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    @property
    def base_url(self) -> str:
        """``http://host:port/api/v1``, like OpenRouter's (``/chat/completions`` is appended)."""
        return f"{self.url}/api/v1"

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/chat/completions", self._chat_completions)
        app.router.add_post("/api/v1/chat/completions", self._chat_completions)
        return app

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        body: dict | None = None

        def record(response: web.StreamResponse) -> web.StreamResponse:
            self.calls.append(RecordedCall(request.path, dict(request.headers), body,
                                           response.status))
            return response

        try:
            parsed = await request.json()
            body = parsed if isinstance(parsed, dict) else None
        except ValueError:
            body = None
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return record(_error(401, "No auth credentials found"))
        if body is None:
            return record(_error(400, "body must be a JSON object"))
        messages = body.get("messages")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return record(_error(400, "'model' is required"))
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and "role" in m and "content" in m for m in messages):
            return record(_error(400, "'messages' must be a non-empty list of {role, content}"))

        reply = self._script.popleft() if self._script else Reply(default_content(messages))
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)  # cancelled if the client gives up first
        if reply.status != 200 or reply.body is not None:
            payload = reply.body if reply.body is not None else {
                "error": {"code": reply.status, "message": f"scripted {reply.status}"}}
            if isinstance(payload, dict):
                return record(web.json_response(payload, status=reply.status,
                                                headers=reply.headers))
            return record(web.Response(text=payload, status=reply.status, headers=reply.headers,
                                       content_type="application/json"))
        n_prompt = sum(len(str(m["content"]).split()) for m in messages)
        n_completion = len(reply.content.split())
        logger.info("openai.standin reply n_messages=%d n_chars=%d", len(messages),
                    len(reply.content))
        return record(web.json_response({
            "id": f"gen-standin-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "provider": "standin",
            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                         "message": {"role": "assistant", "content": reply.content}}],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_completion,
                      "total_tokens": n_prompt + n_completion},
        }, headers=reply.headers))


async def _serve(args: argparse.Namespace) -> None:
    async with OpenAIStandin(api_key=args.api_key, host=args.host, port=args.port) as standin:
        print(f"openai standin listening base_url={standin.base_url}", flush=True)
        await standin.run_until_signal()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m standins.openai",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8092, help="0 picks a free port")
    parser.add_argument("--api-key", default="dev-key", help="expected bearer key")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
