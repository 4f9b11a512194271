"""The web channel: the same assistant on a page in the browser.

    python -m bot --web          # http://127.0.0.1:8082/ (BOT_WEB_HOST, BOT_WEB_PORT)

An aiohttp server renders one page (Jinja2, ``bot/web/templates``; CSS and the few lines of
script inline, nothing from a CDN, so it works offline):

- ``GET /``: this browser session's conversation, oldest first: each question, the reply in
  the user's script with its citations, its kind (confident, hedged, refused, error: the
  decision's ``rag.types.Status``), a player for the spoken reply when there is one, and the
  decision chain (what ``/why`` shows: ``bot.chat.render.render_trace``);
- ``POST /ask``: a typed question (form field ``question``; commands as on Telegram:
  ``/why``, ``/lang hi``, ``/voice on``), answered before the 303 back to ``/``, so the page
  works without script and by keyboard;
- ``POST /voice``: a voice note recorded in the page (MediaRecorder, multipart field
  ``audio``), answered through the chat layer's voice path (transcode, speech gate,
  speech-to-text) like a Telegram or WhatsApp voice note; the recording is held in memory
  until answered, never written to the inbox (its rows are kept for good);
- ``GET /audio/{key}``: the spoken reply (OGG/Opus) of one of this session's messages.

A browser session is a chat: an HttpOnly ``SameSite=Strict`` cookie holds a random token and
the chat id is derived from it (:func:`chat_id_of`, 48 bits of its SHA-256), so it is stable
across restarts and the settings (``/lang``, ``/voice``) and ``/why`` follow it. Each message is
claimed in the durable inbox every channel shares (``bot.chat.inbox``; a form sent twice is
answered once, a message a crash left is answered at the next start), answered in its chat's
turn and finished with its outcome. Replies are delivered by ``bot.chat.delivery`` through
:class:`WebOutbox`, which keeps them in memory for the page (``BOT_WEB_HISTORY`` exchanges a
session, ``BOT_WEB_MAX_SESSIONS`` sessions). Rate limit, repeats and voice on/off are the chat
layer's; a session is the sender the rate limit counts, and an address may start at most
``NEW_SESSIONS_PER_HOUR`` sessions that ask something, so new cookies do not escape the limit.

Bound to 127.0.0.1 unless told otherwise; bound anywhere else it refuses to start without
``BOT_WEB_TOKEN`` (``?token=`` once, then a cookie; or ``Authorization: Bearer``), as the
dashboard does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import html
import json
import logging
import re
import secrets
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import jinja2
from aiohttp import web
from markupsafe import Markup as SafeHtml

from bot.chat.delivery import OnWire
from bot.chat.inbox import Claim, channel_inbox
from bot.chat.lifecycle import Answering, MessageLifecycle, until_signalled
from bot.chat.policy import ChannelPolicy
from bot.chat.questions import answer_voice, reply_to_text
from bot.chat.ratelimit import RateLimiter
from bot.chat.render import Markup, Text, render_trace
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, VoiceNote
from bot.chat.voice_cache import VoiceAudio
from bot.errors import SettingsError, VoiceDownloadError
from bot.settings import Settings
from bot.web.settings import WebSettings
from rag.types import Result, Status
from storage.backend import driver_errors

if TYPE_CHECKING:
    from multidict import MultiDictProxy  # aiohttp's (request.post()'s type)

log = logging.getLogger(__name__)

CHANNEL = "web"
"""This channel's name, as stored with every row."""
TEMPLATES = Path(__file__).resolve().parent / "templates"
SESSION_COOKIE = "voice_rag_web"
AUTH_COOKIE = "voice_rag_web_auth"
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{32}")
"""A session token as :func:`new_session_token` makes them (24 random bytes, URL-safe base64)."""
_MSG_RE = re.compile(r"[0-9a-f]{32}")
"""A message id as the page makes them (a UUID4 in hex, one per rendered form)."""
CHAT_ID_BITS = 48
"""Bits of the session token's SHA-256 kept as the chat id: well inside SQLite's and
PostgreSQL's signed 64-bit integers, and 2^48 leaves collisions negligible (birthday bound:
about one in 10^5 at a million sessions)."""
NEW_SESSIONS_PER_HOUR = 30
"""Sessions one client address may start asking in an hour. A session is the rate limit's
sender, so without this a script could take a fresh cookie for every question; 30 leaves
room for a household or office behind one address."""
REPLICA_WAIT_S = 90.0
"""Replicas (PostgreSQL): seconds the form waits for the dispatcher to answer its message before
the page is shown with it still "answering…": past the slowest voice answer (Sarvam's 20 s
speech-to-text budget for a note, the pipeline, 20 s for a spoken reply), short of a proxy's
usual 100-120 s timeout."""
FORM_OVERHEAD_BYTES = 65536
"""Bytes a request body may carry beyond the recording (``BOT_WEB_MAX_UPLOAD_MB``): the form's
other fields and the multipart framing, with room to spare."""
QUESTION_CHARS = 4000
"""Longest question accepted from the form, in characters; more is cut before the chat layer
(whose input guard refuses anything over its own, lower, limit with a stated reason)."""

HTML = Markup(html.escape, lambda s: f"<strong>{s}</strong>", lambda s: f"<em>{s}</em>",
              lambda s: f"<code>{s}</code>")
"""The chat layer's text as HTML, every span escaped (line breaks kept by the page's CSS)."""

Kind = Literal["confident", "hedged", "refused", "error"]


def kind_of(result: Result) -> Kind:
    """How the page labels a decision: ``confident`` (``Status.ANSWERED``), ``hedged``,
    ``refused`` (any ``refused-*``) or ``error``."""
    if result.status is Status.ANSWERED:
        return "confident"
    if result.status is Status.HEDGED:
        return "hedged"
    return "refused" if result.status.is_refusal else "error"


def new_session_token() -> str:
    return secrets.token_urlsafe(24)


def chat_id_of(token: str) -> int:
    """The chat id of session ``token``: its SHA-256's first ``CHAT_ID_BITS`` bits."""
    digest = hashlib.sha256(b"voice-rag-web-chat:" + token.encode()).digest()
    return int.from_bytes(digest, "big") >> (256 - CHAT_ID_BITS)


@dataclass(slots=True)
class Exchange:
    """One message of a session and what came back: ``key`` is its inbox key, ``question`` the
    typed text (or a voice note's label), ``replies`` the texts delivered, ``kind`` and ``chain``
    (``/why``) from its decision, ``lang`` the reply's language, ``voice`` the spoken reply."""

    key: str
    question: str
    is_voice: bool = False
    replies: list[Text] = field(default_factory=list)
    decision_id: int | None = None
    kind: Kind | None = None
    lang: str | None = None
    chain: Text | None = None
    voice: VoiceAudio | None = None
    is_done: bool = False
    answered: asyncio.Event = field(default_factory=asyncio.Event)


class Conversations:
    """Each chat's recent exchanges, in memory: ``history`` per chat, ``max_sessions`` chats
    (least recently used dropped)."""

    def __init__(self, history: int, max_sessions: int) -> None:
        self.history, self.max_sessions = history, max_sessions
        self._chats: OrderedDict[int, list[Exchange]] = OrderedDict()

    def of(self, chat_id: int) -> list[Exchange]:
        exchanges = self._chats.get(chat_id, [])
        if chat_id in self._chats:
            self._chats.move_to_end(chat_id)
        return exchanges

    def knows(self, chat_id: int) -> bool:
        return chat_id in self._chats

    def get(self, chat_id: int, key: str) -> Exchange | None:
        return next((e for e in self._chats.get(chat_id, ()) if e.key == key), None)

    def add(self, chat_id: int, exchange: Exchange) -> Exchange:
        exchanges = self._chats.setdefault(chat_id, [])
        self._chats.move_to_end(chat_id)
        exchanges.append(exchange)
        del exchanges[:-self.history]
        while len(self._chats) > self.max_sessions:
            self._chats.popitem(last=False)
        return exchange


class WebOutbox:
    """How replies leave on the web (the chat layer's ``Outbox``): kept with the message's
    :class:`Exchange` for the page to show; no length limit, no busy indicator."""

    def __init__(self, conversations: Conversations) -> None:
        self.conversations = conversations

    def _exchange(self, asker: Asker) -> Exchange:
        key = asker.message_key or ""
        return self.conversations.get(asker.chat_id, key) or \
            self.conversations.add(asker.chat_id, Exchange(key, ""))

    async def send_text(self, asker: Asker, texts: list[Text], on_wire: OnWire) -> list[int]:
        await on_wire()
        self._exchange(asker).replies.extend(texts)
        return []

    async def send_voice(self, asker: Asker, audio: VoiceAudio, on_wire: OnWire) -> str:
        self._exchange(asker).voice = audio
        return f"kept for the page, {len(audio.ogg)} bytes, {audio.duration_s:.1f} s"

    def busy(self, asker: Asker, activity: Literal["typing", "recording"]) -> nullcontext:
        return nullcontext()


def web_policy(web_settings: WebSettings) -> ChannelPolicy:
    """The web's rules for the chat layer: no allow-list (the token guards an exposed page),
    voice notes up to ``BOT_WEB_MAX_UPLOAD_MB``."""
    return ChannelPolicy(CHANNEL, max_voice_bytes=int(web_settings.max_upload_mb * 2**20))


class WebFrontEnd(MessageLifecycle):
    """The page and its forms; each message claimed is answered by the chat layer's lifecycle
    (``bot.chat.lifecycle.MessageLifecycle``: log lines ``web_reply``, ``web_error``), its
    replies kept for the page. :func:`serving` runs it."""

    ref_name = "key"

    def __init__(self, services: Services, web_settings: WebSettings) -> None:
        self.web = web_settings
        services.channels[CHANNEL] = web_policy(web_settings)
        self.conversations = Conversations(web_settings.history, web_settings.max_sessions)
        super().__init__(services, channel_inbox(services, CHANNEL),
                         WebOutbox(self.conversations))
        self.new_sessions = RateLimiter(NEW_SESSIONS_PER_HOUR, 3600.0)
        self.pages = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                                        autoescape=True, trim_blocks=True, lstrip_blocks=True)
        self._auth = (hmac.new(web_settings.token.encode(), b"web-cookie", hashlib.sha256)
                      .hexdigest() if web_settings.token else None)
        self._uploads: dict[str, bytes] = {}  # inbox key -> recording, until answered
        self.max_body_bytes = int(web_settings.max_upload_mb * 2**20) + FORM_OVERHEAD_BYTES

    # ---------------------------------------------------------------- the server
    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=self.max_body_bytes)
        app.router.add_get("/", self.page)
        app.router.add_post("/ask", self.ask)
        app.router.add_post("/voice", self.voice)
        app.router.add_get("/audio/{key}", self.audio)
        app.router.add_get("/healthz", _healthz)
        return app

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        """With ``BOT_WEB_TOKEN``: the bearer token, the cookie, or ``?token=`` (which sets the
        cookie and reloads without it); else 401. Without: everything passes."""
        if self._auth is None or request.path == "/healthz":
            return await handler(request)
        header = request.headers.get("Authorization", "")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and self._is_token(credentials.strip()):
            return await handler(request)
        cookie = request.cookies.get(AUTH_COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self._auth.encode()):
            return await handler(request)
        if self._is_token(request.query.get("token", "")):
            query = {k: v for k, v in request.query.items() if k != "token"}
            response = _see_other(request.rel_url.with_query(query))
            response.set_cookie(AUTH_COOKIE, self._auth, httponly=True, samesite="Strict",
                                path="/")
            return response
        log.warning("web_refused reason=no_token path=%s remote=%s", request.path[:80],
                    request.remote)
        return web.Response(status=401, text="a token is required: open this page with "
                            "?token=<BOT_WEB_TOKEN>")

    def _is_token(self, value: str) -> bool:
        return bool(value) and hmac.compare_digest(value.encode(), self.web.token.encode())

    @staticmethod
    def _session(request: web.Request) -> tuple[str, bool]:
        """This request's session token and whether it is new (no valid cookie)."""
        token = request.cookies.get(SESSION_COOKIE, "")
        return (token, False) if _TOKEN_RE.fullmatch(token) else (new_session_token(), True)

    @staticmethod
    def _keep(response: web.StreamResponse, token: str, is_new: bool) -> web.StreamResponse:
        if is_new:
            response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Strict",
                                path="/", max_age=365 * 86400)
        return response

    async def page(self, request: web.Request) -> web.StreamResponse:
        """The conversation of this session, and the form."""
        token, is_new = self._session(request)
        chat_id = chat_id_of(token)
        exchanges = [] if is_new else self.conversations.of(chat_id)
        body = self.pages.get_template("page.html").render(
            exchanges=[_view(e) for e in exchanges], msg=uuid.uuid4().hex,
            notice=request.query.get("notice", "")[:200], max_upload_mb=self.web.max_upload_mb,
            max_chars=self.services.settings.rag.max_query_chars,
            can_record=bool(self.services.settings.sarvam.api_key))  # speech-to-text needs it
        response = web.Response(text=body, content_type="text/html", headers={
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer"})
        return self._keep(response, token, is_new)

    async def _form(self, request: web.Request, field: str
                    ) -> MultiDictProxy | web.StreamResponse:
        """The posted form, or what to answer instead (each logged as ``web_refused``): a body
        declared over :attr:`max_body_bytes` is refused before it is read (303 to the page's
        "too big" notice), a body without ``field`` (not the page's form) gets 400 with what to
        send, and a client gone mid-body gets 400 (nobody reads it)."""
        if (request.content_length or 0) > self.max_body_bytes:
            log.warning("web_refused reason=too_big path=%s bytes=%d", request.path,
                        request.content_length)
            return _see_other("/?notice=too_big")
        try:
            form = await request.post()
        except web.HTTPRequestEntityTooLarge:
            log.warning("web_refused reason=too_big path=%s", request.path)
            return _see_other("/?notice=too_big")
        except (ConnectionResetError, asyncio.IncompleteReadError) as exc:
            log.warning("web_refused reason=client_gone path=%s detail=%s", request.path, exc)
            return web.Response(status=400, text="the request ended before its body")
        except ValueError as exc:  # a malformed multipart or url-encoded body
            log.warning("web_refused reason=malformed path=%s detail=%s", request.path, exc)
            return web.Response(status=400, text=f"send the page's form (field {field!r})")
        if field not in form:
            log.warning("web_refused reason=no_%s path=%s content_type=%s", field, request.path,
                        request.content_type)
            return web.Response(status=400, text=f"send the page's form (field {field!r})")
        return form

    async def ask(self, request: web.Request) -> web.StreamResponse:
        """A typed question from the form: claimed, answered, then 303 back to the page (with
        a notice when it was empty)."""
        form = await self._form(request, "question")
        if isinstance(form, web.StreamResponse):
            return form
        question = form.get("question")
        question = question[:QUESTION_CHARS] if isinstance(question, str) else ""
        if not question.strip():
            log.info("web_refused reason=empty_question path=/ask")
            return _see_other("/?notice=empty")
        return await self._take(request, form.get("msg"), {"type": "text", "text": question},
                                question, is_voice=False)

    async def voice(self, request: web.Request) -> web.StreamResponse:
        """A voice note recorded in the page (multipart ``audio``), answered like one from
        Telegram; 303 back to the page."""
        form = await self._form(request, "audio")
        if isinstance(form, web.StreamResponse):
            return form
        upload = form.get("audio")
        data = upload.file.read() if isinstance(upload, web.FileField) else b""
        if not data:
            log.info("web_refused reason=empty_recording path=/voice")
            return _see_other("/?notice=no_audio")
        return await self._take(request, form.get("msg"), {"type": "voice", "bytes": len(data)},
                                f"recorded, {len(data) / 1024:.0f} KB", is_voice=True,
                                audio=data)

    async def _take(self, request: web.Request, msg: Any, payload: dict[str, Any],
                    question: str, *, is_voice: bool,
                    audio: bytes | None = None) -> web.StreamResponse:
        """Claim the message (a form sent twice has the same ``msg``: answered once), answer it
        in its chat's turn, and send the browser back to the page. A recording (``audio``) is
        kept in memory until it is answered, not in the inbox, whose rows are never deleted:
        one left by a crash is answered as a voice note that could not be downloaded."""
        token, is_new = self._session(request)
        chat_id = chat_id_of(token)
        if not self.conversations.knows(chat_id):  # a new cookie per question is no way out
            verdict = self.new_sessions.acquire(request.remote or "-", self.services.clock())
            if not verdict.is_allowed:
                log.warning("web_refused reason=new_sessions remote=%s wait_s=%d",
                            request.remote, verdict.wait_s)
                return web.Response(status=429, text="too many new sessions from this address: "
                                    f"try again in {verdict.wait_s} s",
                                    headers={"Retry-After": str(verdict.wait_s)})
        msg = msg if isinstance(msg, str) and _MSG_RE.fullmatch(msg) else uuid.uuid4().hex
        key = f"{chat_id}:{msg}"
        language = request.headers.get("Accept-Language", "").split(",")[0].split(";")[0]
        payload = {**payload, "chat_id": chat_id, "sent_at": time.time(),
                   "language_code": language.strip()[:16] or None, "question": question}
        try:
            claim = await self.inbox.claim(key, chat_id, json.dumps(payload, ensure_ascii=False))
        except driver_errors() as exc:
            log.warning("web_unstored detail=%s", str(exc).strip()[:200])
            return web.Response(status=503, text="database unavailable, try again")
        if claim is None:
            log.info("web_duplicate key=%s", key)
            return self._keep(_see_other("/"), token, is_new)
        exchange = self.conversations.add(chat_id, Exchange(key, question, is_voice=is_voice))
        if audio is not None:
            self._uploads[key] = audio
        if not self.inbox.submit(claim, chat_id):
            # shielded: a browser that gives up waiting does not cancel the answer
            await asyncio.shield(self.spawn(payload, claim))
        else:  # replicas: the dispatcher answers it in its chat's turn, mostly on this replica
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(exchange.answered.wait()), REPLICA_WAIT_S)
        return self._keep(_see_other(f"/#m-{msg}"), token, is_new)

    async def audio(self, request: web.Request) -> web.StreamResponse:
        """The spoken reply of one of this session's messages (OGG/Opus), else 404."""
        token, is_new = self._session(request)
        exchange = None if is_new else self.conversations.get(
            chat_id_of(token), f"{chat_id_of(token)}:{request.match_info['key']}")
        if exchange is None or exchange.voice is None:
            raise web.HTTPNotFound(text="no such spoken reply in this session")
        return web.Response(body=exchange.voice.ogg, content_type="audio/ogg",
                            headers={"Cache-Control": "private, max-age=3600"})

    # ---------------------------------------------------------------- the lifecycle's hooks
    def asker_of(self, payload: dict[str, Any], claim: Claim) -> Asker:
        """The session (``chat_id``) that sent ``payload``; its browser's language."""
        chat_id = int(payload["chat_id"])
        return Asker(CHANNEL, chat_id, user_id=chat_id, message_key=claim.key,
                     language_code=payload.get("language_code"))

    def age_s(self, payload: dict[str, Any]) -> float | None:
        return time.time() - float(payload.get("sent_at", time.time()))

    def begin(self, payload: dict[str, Any], claim: Claim) -> Answering:
        """The message, with its :class:`Exchange` on the page (added if a crash lost it)."""
        message = super().begin(payload, claim)
        chat_id, key = message.asker.chat_id, claim.key
        message.note = self.conversations.get(chat_id, key) or self.conversations.add(
            chat_id, Exchange(key, str(payload.get("question", "")),
                              is_voice=payload.get("type") == "voice"))
        return message

    async def after_reply(self, message: Answering, reply: Reply) -> None:
        await self._describe(message.note, reply)

    def after_error_reply(self, message: Answering) -> None:
        message.note.kind = "error"

    def finished(self, message: Answering) -> None:
        """The page shows the message answered, its recording is dropped, and the form waiting
        for it (replicas) returns."""
        message.note.is_done = True
        self._uploads.pop(message.claim.key, None)
        message.note.answered.set()

    async def reply_to(self, asker: Asker, payload: dict[str, Any]) -> Reply:
        """The reply to one message, from the chat layer."""
        if payload.get("type") == "voice":
            key = asker.message_key or ""

            async def fetch() -> bytes:
                data = self._uploads.get(key)
                if data is None:
                    raise VoiceDownloadError("the recording was lost: the server restarted "
                                             "before answering it")
                return data

            size = payload.get("bytes")
            return await answer_voice(self.services, asker, VoiceNote(
                size if isinstance(size, int) else None, None, fetch))
        return await reply_to_text(self.services, asker, str(payload.get("text", "")))

    async def _describe(self, exchange: Exchange, reply: Reply) -> None:
        """The kind, language and chain of the decision behind ``reply`` (after delivery, so
        the spoken reply's stages are in the chain)."""
        if reply.decision_id is None:
            return
        stored = await self.services.db.last_decision(CHANNEL, chat_id_of_key(exchange.key))
        if stored is None or stored.id != reply.decision_id:
            return
        result = stored.result
        exchange.decision_id, exchange.kind, exchange.lang = stored.id, kind_of(result), \
            result.lang
        exchange.chain = render_trace(result.trace, result.lang,
                                      query=result.query or stored.transcript,
                                      followup=result.followup)


def chat_id_of_key(key: str) -> int:
    """The chat id in an inbox key ``<chat id>:<message id>``."""
    return int(key.partition(":")[0])


def _view(exchange: Exchange) -> dict[str, Any]:
    """What the template shows of ``exchange`` (HTML already escaped by :data:`HTML`)."""
    return {
        "msg": exchange.key.partition(":")[2], "question": exchange.question,
        "is_voice": exchange.is_voice, "kind": exchange.kind, "lang": exchange.lang,
        "is_done": exchange.is_done, "decision_id": exchange.decision_id,
        "replies": [SafeHtml(HTML.render(t)) for t in exchange.replies],
        "chain": None if exchange.chain is None else
        SafeHtml(HTML.render(exchange.chain)),
        "voice_s": None if exchange.voice is None else exchange.voice.duration_s,
    }


def _see_other(location: object) -> web.Response:
    """303 to ``location`` (a path, or a URL object): after a form, the page is fetched anew."""
    return web.Response(status=303, headers={"Location": str(location)})


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


@asynccontextmanager
async def serving(services: Services, web_settings: WebSettings
                  ) -> AsyncIterator[tuple[WebFrontEnd, str]]:
    """The page listening on ``host``:``port`` (0: any free port); yields the front end and its
    base URL (``http://host:port``)."""
    front = WebFrontEnd(services, web_settings)
    await front.replay()
    runner = web.AppRunner(front.make_app(), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, web_settings.host, web_settings.port)
        await site.start()
        host, port = site._server.sockets[0].getsockname()[:2]  # type: ignore[union-attr]
        yield front, f"http://{host}:{port}"
    finally:
        await runner.cleanup()
        await front.aclose()


async def _serve(settings: Settings, web_settings: WebSettings) -> None:
    services = await Services.open(settings)
    try:
        async with serving(services, web_settings) as (_front, url):
            auth = "token" if web_settings.token else "none (loopback)"
            log.info("web_listening url=%s/ auth=%s", url, auth)
            print(f"web: {url}/ (auth {auth})", flush=True)
            await until_signalled()
    finally:
        await services.close()


def web_settings_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why ``python -m bot --web`` cannot start with these variables (malformed, or exposed
    without a token), else None; checked before the index is loaded."""
    try:
        return WebSettings.from_env(env).exposure_problem()
    except SettingsError as exc:
        return str(exc)


def run_web(settings: Settings, env: Mapping[str, str] | None = None) -> int:
    """Serve the page until SIGINT/SIGTERM; the exit code (2: it cannot start)."""
    problem = web_settings_problem(env)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    web_settings = WebSettings.from_env(env)
    try:
        asyncio.run(_serve(settings, web_settings))
    except OSError as exc:  # the port is taken, the host is not this machine's
        print(f"error: cannot listen on {web_settings.host}:{web_settings.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
