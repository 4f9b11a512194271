"""A WhatsApp Cloud API (Graph API) stand-in on 127.0.0.1, plus signed webhook payloads.

It speaks real HTTP (aiohttp) in the Graph API's wire format for the three calls a bot needs:

- ``POST /{version}/{phone-number-id}/messages`` (JSON ``{"messaging_product": "whatsapp",
  "to", "type": "text", "text": {"body"}}``): answers ``{"messaging_product", "contacts",
  "messages": [{"id": "wamid.…"}]}``; a body over 4,096 characters is refused (400, code 100),
  as is a reply to a number whose 24-hour customer-service window is closed
  (:meth:`FakeGraph.close_window`: 400, code 131047 "Re-engagement message").
- ``POST /{version}/{phone-number-id}/media`` (multipart ``messaging_product``, ``type``,
  ``file``): stores the upload and answers ``{"id"}``; a ``type: audio`` message must name an
  uploaded (or added) media id, else 400, code 100.
- ``GET /{version}/{media-id}``: the media's short-lived ``url``, ``mime_type``, ``sha256``
  and ``file_size``; unknown ids give 400, code 100.
- ``GET /media/{media-id}`` (the ``url`` above): the bytes, only with the bearer token (else
  401), 404 once the URL expired (:meth:`FakeGraph.expire_media`).

Every call needs ``Authorization: Bearer <token>`` (401, code 190 otherwise). Errors have the
Graph shape ``{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}``; scripted
ones (:meth:`FakeGraph.fail_next`: 401, 403, 429 with ``Retry-After``, 5xx) and a delay per
call (``delay_s``) exercise a client's fault handling.

Like Meta, it can also deliver webhooks: :meth:`FakeGraph.subscribe` sets the callback URL
and app secret, and :meth:`FakeGraph.push` queues a payload, POSTed signed, in order, one at a
time; a delivery that fails (connection refused, any status but 200) stays queued and is
retried after ``webhook_retry_s`` (Meta retries for up to 7 days, backing off), so a message a
bot did not commit is redelivered. Each attempt is in ``webhook_attempts``.

The module also builds webhook payloads as Meta sends them (:func:`text_message`,
:func:`audio_message`, :func:`other_message`) and signs them (:func:`sign`:
``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body with the app secret>``).

    async with FakeGraph() as graph:
        graph.add_media("M1", ogg_bytes, "audio/ogg; codecs=opus")
        ...
        [sent] = await graph.wait_for(1)
        assert sent.body["text"]["body"].startswith("आपने कहा")
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from standins._server import LoopbackServer

DEFAULT_TOKEN = "EAAG-test-token"
DEFAULT_PHONE_NUMBER_ID = "106540352242922"
DEFAULT_VERSION = "v21.0"
MAX_TEXT_CHARS = 4096
"""Longest text message body the Cloud API accepts, in characters."""
WINDOW_CLOSED_CODE = 131047
"""Graph error code of a free-form reply outside the 24-hour customer-service window."""


@dataclass(slots=True)
class Sent:
    """One ``POST …/messages`` the stand-in received: its JSON ``body``, the HTTP ``status`` it
    answered and the monotonic time ``at_s`` it arrived."""

    body: dict[str, Any]
    status: int
    at_s: float


@dataclass(slots=True)
class _Media:
    data: bytes
    mime_type: str
    n_expired: int = 0


@dataclass(slots=True)
class _Failure:
    status: int
    code: int
    message: str
    retry_after_s: float | None = None


@dataclass(slots=True)
class FakeGraph(LoopbackServer):
    """The stand-in; ``url`` (after start) is what a client uses as its Graph base URL."""

    token: str = DEFAULT_TOKEN
    phone_number_id: str = DEFAULT_PHONE_NUMBER_ID
    version: str = DEFAULT_VERSION
    delay_s: float = 0.0
    # called with each message as it is recorded, before the answer goes back (a test kills
    # the bot there: the message arrived, the bot never heard so)
    on_sent: Callable[[Sent], None] | None = None
    sent: list[Sent] = field(default_factory=list)
    media_lookups: list[str] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    uploads: list[str] = field(default_factory=list)
    n_requests: int = 0
    _media: dict[str, _Media] = field(default_factory=dict)
    _failures: list[_Failure] = field(default_factory=list)
    _closed: set[str] = field(default_factory=set)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition | None = None
    webhook_url: str = ""
    app_secret: str = ""
    webhook_retry_s: float = 0.05
    # (message ids of the payload, HTTP status or 0 for no answer), one per delivery attempt
    webhook_attempts: list[tuple[tuple[str, ...], int]] = field(default_factory=list)
    _outgoing: list[dict[str, Any]] = field(default_factory=list)
    _webhook_task: asyncio.Task | None = None
    _webhook_wake: asyncio.Event | None = None
    _client: ClientSession | None = None

    def __post_init__(self) -> None:
        LoopbackServer.__init__(self)

    # ------------------------------------------------------------------ webhooks (Meta's side)
    def subscribe(self, url: str, app_secret: str) -> None:
        """Deliver pushed payloads to ``url``, signed with ``app_secret`` (after start)."""
        self.webhook_url, self.app_secret = url, app_secret
        if self._webhook_task is None:
            self._webhook_wake = asyncio.Event()
            self._webhook_task = asyncio.create_task(self._webhook_loop())

    def push(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Queue ``payload`` (e.g. :func:`text_message`) for delivery; returns it."""
        self._outgoing.append(payload)
        if self._webhook_wake is not None:
            self._webhook_wake.set()
        return payload

    @property
    def pending_webhooks(self) -> list[dict[str, Any]]:
        """Payloads not yet delivered with a 200."""
        return list(self._outgoing)

    async def _webhook_loop(self) -> None:
        assert self._webhook_wake is not None
        self._client = ClientSession(timeout=ClientTimeout(total=15))
        while True:
            if not self._outgoing:
                self._webhook_wake.clear()
                await self._webhook_wake.wait()
                continue
            payload = self._outgoing[0]
            body = encode(payload)
            ids = tuple(m.get("id", "") for e in payload.get("entry", [])
                        for c in e.get("changes", []) for m in c["value"].get("messages", []))
            status = 0
            try:
                async with self._client.post(self.webhook_url, data=body, headers={
                        "Content-Type": "application/json",
                        "X-Hub-Signature-256": sign(body, self.app_secret)}) as response:
                    status = response.status
                    await response.read()
            except (ClientError, OSError, TimeoutError):
                pass
            self.webhook_attempts.append((ids, status))
            if status == 200:
                self._outgoing.pop(0)
            else:
                await asyncio.sleep(self.webhook_retry_s)

    async def stop(self) -> None:
        task, self._webhook_task = self._webhook_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.close()
            self._client = None
        await LoopbackServer.stop(self)

    # ------------------------------------------------------------------ scripting
    def add_media(self, media_id: str, data: bytes, mime_type: str = "audio/ogg; codecs=opus"
                  ) -> None:
        self._media[media_id] = _Media(data, mime_type)

    def expire_media(self, media_id: str, n_downloads: int = 1) -> None:
        """The next ``n_downloads`` downloads of ``media_id`` answer 404, as a URL used after its
        5 minutes does."""
        self._media[media_id].n_expired = n_downloads

    def close_window(self, wa_id: str) -> None:
        """Free-form messages to ``wa_id`` are refused: its last message is over 24 h old."""
        self._closed.add(wa_id)

    def fail_next(self, status: int, *, code: int | None = None, message: str = "",
                  retry_after_s: float | None = None, times: int = 1) -> None:
        """The next ``times`` calls (any endpoint) fail with ``status``; ``code`` defaults to the
        Graph code of that status (401: 190, 403: 200, 429: 130429, else 2)."""
        code = code if code is not None else {401: 190, 403: 200, 429: 130429}.get(status, 2)
        self._failures.extend([_Failure(status, code, message or f"scripted {status}",
                                        retry_after_s)] * times)

    async def wait_for(self, n: int = 1, timeout: float = 20.0,
                       kind: str | None = "text") -> list[Sent]:
        """The first ``n`` messages of type ``kind`` (None: any) sent with status 200, waiting
        up to ``timeout`` s."""
        assert self._changed is not None, "start the stand-in first"
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(
                lambda: len(self.delivered(kind)) >= n), timeout)
        return self.delivered(kind)[:n]

    def delivered(self, kind: str | None = None) -> list[Sent]:
        """Messages answered 200, in order; only those of type ``kind`` when given."""
        return [s for s in self.sent
                if s.status == 200 and (kind is None or s.body.get("type") == kind)]

    # ------------------------------------------------------------------ server
    def make_app(self) -> web.Application:
        self._changed = asyncio.Condition()
        app = web.Application(middlewares=[self._auth])
        app.router.add_post(f"/{self.version}/{{phone_number_id}}/messages", self._messages)
        app.router.add_post(f"/{self.version}/{{phone_number_id}}/media", self._upload)
        app.router.add_get(f"/{self.version}/{{media_id}}", self._media_lookup)
        app.router.add_get("/media/{media_id}", self._download)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.n_requests += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if self._failures:
            failure = self._failures.pop(0)
            response = _error(failure.status, failure.code, failure.message)
            if failure.retry_after_s is not None:
                response.headers["Retry-After"] = f"{failure.retry_after_s:g}"
            if request.path.endswith("/messages"):
                await self._record(await request.json(), failure.status)
            return response
        return await handler(request)

    async def _record(self, body: dict[str, Any], status: int) -> None:
        assert self._changed is not None
        async with self._changed:
            self.sent.append(Sent(body, status, time.monotonic()))
            self._changed.notify_all()
        if self.on_sent is not None:
            self.on_sent(self.sent[-1])

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["phone_number_id"] != self.phone_number_id:
            return _error(400, 100, "Unsupported post request: unknown phone number id")
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, 100, "Invalid JSON body")
        to, text = body.get("to"), (body.get("text") or {}).get("body")
        if body.get("type") == "audio":
            text = "(audio)" if (body.get("audio") or {}).get("id") in self._media else None
        if body.get("messaging_product") != "whatsapp" or body.get("type") not in ("text",
                                                                                  "audio") \
                or not isinstance(to, str) or not isinstance(text, str) or not text:
            status, response = 400, _error(400, 100, "(#100) Invalid parameter")
        elif len(text) > MAX_TEXT_CHARS:
            status, response = 400, _error(400, 100, "(#100) Param text['body'] must be at "
                                                     f"most {MAX_TEXT_CHARS} characters long.")
        elif to in self._closed:
            status, response = 400, _error(400, WINDOW_CLOSED_CODE, "(#131047) Re-engagement "
                                           "message: more than 24 hours have passed since the "
                                           "recipient last replied")
        else:
            status = 200
            response = web.json_response({
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": f"wamid.out.{next(self._ids)}"}],
            })
        await self._record(body, status)
        return response

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not hasattr(upload, "file"):
            return _error(400, 100, "(#100) The parameter file is required.")
        media_id = f"up-{next(self._ids)}"
        mime_type = str(form.get("type") or upload.content_type)
        self._media[media_id] = _Media(upload.file.read(), mime_type)
        self.uploads.append(media_id)
        return web.json_response({"id": media_id})

    def media_bytes(self, media_id: str) -> bytes:
        """The bytes of an uploaded or added media id."""
        return self._media[media_id].data

    async def _media_lookup(self, request: web.Request) -> web.StreamResponse:
        media_id = request.match_info["media_id"]
        self.media_lookups.append(media_id)
        media = self._media.get(media_id)
        if media is None:
            return _error(400, 100, f"Unsupported get request. Object with ID '{media_id}' "
                                    "does not exist")
        return web.json_response({
            "messaging_product": "whatsapp",
            "url": f"{self.url}/media/{media_id}",
            "mime_type": media.mime_type,
            "sha256": hashlib.sha256(media.data).hexdigest(),
            "file_size": len(media.data),
            "id": media_id,
        })

    async def _download(self, request: web.Request) -> web.StreamResponse:
        media_id = request.match_info["media_id"]
        self.downloads.append(media_id)
        media = self._media.get(media_id)
        if media is None or media.n_expired > 0:
            if media is not None:
                media.n_expired -= 1
            return web.Response(status=404, text="URL signature expired")
        return web.Response(body=media.data, content_type=media.mime_type.split(";")[0])


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response({"error": {
        "message": message, "type": "OAuthException", "code": code, "error_subcode": 0,
        "fbtrace_id": "AbCdEfGh123",
    }}, status=status)


# ---------------------------------------------------------------------- webhook payloads
def sign(body: bytes, app_secret: str) -> str:
    """The ``X-Hub-Signature-256`` header value Meta sends with ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


_wamids = itertools.count(1)


def _envelope(wa_id: str, message: dict[str, Any], phone_number_id: str,
              name: str, sent_at: float | None = None) -> dict[str, Any]:
    message = {"from": wa_id, "id": message.pop("id", None) or f"wamid.in.{next(_wamids)}",
               "timestamp": str(int(time.time() if sent_at is None else sent_at)), **message}
    return {"object": "whatsapp_business_account", "entry": [{
        "id": "102290129340398",
        "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881",
                         "phone_number_id": phone_number_id},
            "contacts": [{"profile": {"name": name}, "wa_id": wa_id}],
            "messages": [message],
        }}],
    }]}


def text_message(wa_id: str, body: str, *, message_id: str | None = None,
                 phone_number_id: str = DEFAULT_PHONE_NUMBER_ID, name: str = "Asha",
                 sent_at: float | None = None) -> dict[str, Any]:
    """A webhook payload carrying one text message from ``wa_id``, sent at ``sent_at`` (Unix
    seconds; default now)."""
    return _envelope(wa_id, {"id": message_id, "type": "text", "text": {"body": body}},
                     phone_number_id, name, sent_at)


def audio_message(wa_id: str, media_id: str, *, voice: bool = True,
                  message_id: str | None = None, phone_number_id: str = DEFAULT_PHONE_NUMBER_ID,
                  name: str = "Asha") -> dict[str, Any]:
    """A webhook payload carrying a voice note (``voice=True``) or audio file ``media_id``."""
    audio = {"mime_type": "audio/ogg; codecs=opus", "sha256": "", "id": media_id,
             "voice": voice}
    return _envelope(wa_id, {"id": message_id, "type": "audio", "audio": audio},
                     phone_number_id, name)


def other_message(wa_id: str, kind: str, content: dict[str, Any], *,
                  message_id: str | None = None,
                  phone_number_id: str = DEFAULT_PHONE_NUMBER_ID) -> dict[str, Any]:
    """A webhook payload of another type, e.g. ``kind="image"``, ``content={"id": "M9"}``."""
    return _envelope(wa_id, {"id": message_id, "type": kind, kind: content}, phone_number_id,
                     "Asha")


def status_update(wa_id: str, message_id: str, status: str = "failed", *, code: int = 131047,
                  title: str = "Re-engagement message",
                  phone_number_id: str = DEFAULT_PHONE_NUMBER_ID) -> dict[str, Any]:
    """A webhook payload of a delivery status (``sent``, ``delivered``, ``read``, ``failed``;
    a failed one carries ``errors`` with ``code`` and ``title``)."""
    entry: dict[str, Any] = {"id": message_id, "status": status,
                             "timestamp": str(int(time.time())), "recipient_id": wa_id}
    if status == "failed":
        entry["errors"] = [{"code": code, "title": title}]
    return {"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [
        {"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881",
                         "phone_number_id": phone_number_id},
            "statuses": [entry]}}]}]}


def encode(payload: dict[str, Any]) -> bytes:
    """The raw body as Meta sends it (compact JSON, UTF-8, non-ASCII kept)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
