"""The web channel: the same assistant on a page in the browser.

    python -m bot --web [--host 127.0.0.1] [--port 8082] [--demo-voice]

An aiohttp server renders one page (Jinja2, ``bot/web/templates``; CSS and the few lines of
script inline, nothing from a CDN, so it works offline):

- ``GET /``: this browser session's conversation, oldest first: each question, the reply in
  the user's script with its kind (confident, hedged, refused, error: the decision's
  ``rag.types.Status``), its sources (the passage's language, its opening words, the whole
  passage on demand), a player for the spoken reply when there is one, and "Why?" (the decision
  in plain words, then the stage table). Labels follow each reply's language; the page's own
  (the form, the notices) follow the newest reply's, else the chat's ``/lang``, else the
  browser's language. The question box has the cursor and the newest exchange is in view;
- ``POST /ask``: a typed question (form field ``question``; commands as on Telegram:
  ``/why``, ``/lang hi``, ``/voice on``), answered before the 303 back to ``/``, so the page
  works without script and by keyboard;
- ``POST /voice``: a voice note recorded in the page (MediaRecorder, multipart field
  ``audio``), answered through the chat layer's voice path (transcode, speech gate,
  speech-to-text) like a Telegram or WhatsApp voice note;
- ``GET /audio/{msg}``: the spoken reply (OGG/Opus) of one of this session's messages;
- ``GET /fonts/{file}``, ``/favicon.svg``, ``/favicon.ico``: ``bot.web.assets``.

A browser session is a chat: an HttpOnly ``SameSite=Strict`` cookie holds a random token and
the chat id is derived from it (:func:`chat_id_of`, 48 bits of its SHA-256), so it is stable
across restarts and replicas, and the settings (``/lang``, ``/voice``) and ``/why`` follow it.
Each message is claimed in the durable inbox every channel shares (``bot.chat.inbox``; a form
sent twice is answered once, a message a crash left is answered at the next start), answered
in its chat's turn and finished with its outcome. The conversation is in the database
(``storage.web_exchanges``): the question when it comes (a recording with it, until answered),
then what the page shows of the reply (:mod:`bot.web.views`), written once the message is
finished by whichever process answered it. So a restart keeps the page, and replicas behind a
proxy (PostgreSQL, ``BOT_DATABASE_URL``) serve any session without sticky sessions. A session
keeps its newest ``BOT_WEB_HISTORY`` exchanges; an exchange unchanged for ``BOT_WEB_KEEP_DAYS``
days is deleted (at start and hourly). Rate limit, repeats and voice on/off are the chat
layer's; a session is the sender the rate limit counts, and an address may start at most
``NEW_SESSIONS_PER_HOUR`` sessions that ask something, so new cookies do not escape the limit.

Bound to 127.0.0.1 unless told otherwise; bound anywhere else it refuses to start without
``BOT_WEB_TOKEN`` (``?token=`` once, then a cookie; or ``Authorization: Bearer``), as the
dashboard does, and any token shorter than 16 characters is refused at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import secrets
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import jinja2
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from markupsafe import Markup as SafeHtml

from bot.chat.delivery import OnWire
from bot.chat.inbox import Claim, channel_inbox
from bot.chat.lifecycle import Answering, MessageLifecycle, until_signalled
from bot.chat.messages import t
from bot.chat.policy import ChannelPolicy
from bot.chat.questions import answer_voice, reply_to_text
from bot.chat.ratelimit import RateLimiter
from bot.chat.render import Text
from bot.chat.services import Services
from bot.chat.tasks import stop_tasks
from bot.chat.types import Asker, Reply, VoiceNote
from bot.chat.voice_cache import VoiceAudio
from bot.errors import VoiceDownloadError
from bot.settings import Settings
from bot.web.assets import FONT_FAMILIES, STATIC, WEB_FONTS, available_fonts, font_faces
from bot.web.demo import DemoVoice
from bot.web.settings import WebSettings
from bot.web.views import SHOWN_QUESTION_CHARS, ReplyView, decided_view, kind_of, page_exchange
from rag.text import excerpt
from storage.backend import driver_errors
from storage.web_exchanges import StoredExchange, WebExchanges

if TYPE_CHECKING:
    from multidict import MultiDictProxy  # aiohttp's (request.post()'s type)

log = logging.getLogger(__name__)

CHANNEL = "web"
"""This channel's name, as stored with every row."""
TEMPLATES = STATIC.parent / "templates"
SESSION_COOKIE = "voice_rag_web"
AUTH_COOKIE = "voice_rag_web_auth"
PUBLIC_PATHS = frozenset({"/healthz", "/favicon.ico", "/favicon.svg"})
"""Paths served without the token (with ``/fonts/``): nothing of anyone's conversation."""
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
"""Replicas (PostgreSQL): seconds the form waits for its message to be answered (on any
replica) before the page is shown with it still "answering…": past the slowest voice answer
(Sarvam's 20 s speech-to-text budget for a note, the pipeline, 20 s for a spoken reply), short
of a proxy's usual 100-120 s timeout."""
REPLICA_POLL_S = 0.25
"""Replicas: seconds between looks at the database for an answer another replica wrote."""
EXPIRE_EVERY_S = 3600.0
"""Seconds between deletions of exchanges past ``BOT_WEB_KEEP_DAYS`` (and once at start)."""
FORM_OVERHEAD_BYTES = 65536
"""Bytes a request body may carry beyond the recording (``BOT_WEB_MAX_UPLOAD_MB``): the form's
other fields and the multipart framing, with room to spare."""
QUESTION_CHARS = 20_000
"""Longest question taken from the form, in characters, more being dropped before the chat
layer: the input guard cuts anything over its own 1,000 (``RagSettings.max_query_chars``) and
says so in the reply, with the length it was given (so a paste of 20,000 or more is said to be
20,000); ~60 KB of Devanagari in UTF-8, within ``FORM_OVERHEAD_BYTES``' url-encoded share."""
FONT_CACHE_S = 7 * 86400
"""Seconds a browser may keep a served font without asking again (they change only with the
installed package)."""
NOTICES = {"empty": "web_notice_empty", "too_big": "web_notice_too_big",
           "no_audio": "web_notice_no_audio"}
"""``?notice=`` values (set by the server's redirects) and their message keys."""


def new_session_token() -> str:
    return secrets.token_urlsafe(24)


def chat_id_of(token: str) -> int:
    """The chat id of session ``token``: its SHA-256's first ``CHAT_ID_BITS`` bits."""
    digest = hashlib.sha256(b"voice-rag-web-chat:" + token.encode()).digest()
    return int.from_bytes(digest, "big") >> (256 - CHAT_ID_BITS)


def chat_id_of_key(key: str) -> int:
    """The chat id in an inbox key ``<chat id>:<message id>``."""
    return int(key.partition(":")[0])


@dataclass(slots=True)
class Answer:
    """One message while this process answers it (``Answering.note``): its inbox ``key``, what
    was delivered (``texts``), the ``reply`` when it was an answer (not an apology), and
    whether the "something went wrong" reply went out instead (``is_error``)."""

    key: str
    texts: list[Text] = field(default_factory=list)
    reply: Reply | None = None
    is_error: bool = False


class WebOutbox:
    """How replies leave on the web (the chat layer's ``Outbox``): texts are kept with the
    message being answered until its view is written; a spoken reply goes to the database at
    once. No length limit, no busy indicator."""

    def __init__(self, exchanges: WebExchanges, answers: dict[str, Answer]) -> None:
        self.exchanges, self.answers = exchanges, answers

    def _answer(self, asker: Asker) -> Answer:
        key = asker.message_key or ""
        return self.answers.setdefault(key, Answer(key))

    async def send_text(self, asker: Asker, texts: list[Text], on_wire: OnWire) -> list[int]:
        await on_wire()
        self._answer(asker).texts.extend(texts)
        return []

    async def send_voice(self, asker: Asker, audio: VoiceAudio, on_wire: OnWire) -> str:
        await self.exchanges.set_voice(asker.message_key or "", audio.ogg, audio.duration_s)
        return f"kept for the page, {len(audio.ogg)} bytes, {audio.duration_s:.1f} s"

    def busy(self, asker: Asker, activity: Literal["typing", "recording"]) -> nullcontext:
        return nullcontext()


def web_policy(web_settings: WebSettings) -> ChannelPolicy:
    """The web's rules for the chat layer: no allow-list (the token guards an exposed page),
    voice notes up to ``BOT_WEB_MAX_UPLOAD_MB``."""
    return ChannelPolicy(CHANNEL, max_voice_bytes=int(web_settings.max_upload_mb * 2**20))


class WebFrontEnd(MessageLifecycle):
    """The page and its forms; each message claimed is answered by the chat layer's lifecycle
    (``bot.chat.lifecycle.MessageLifecycle``: log lines ``web_reply``, ``web_error``), then its
    view written to the database. :func:`serving` runs it; ``demo`` is the Sarvam stand-in of
    ``--demo-voice`` (the page says its transcripts are scripted)."""

    ref_name = "key"

    def __init__(self, services: Services, web_settings: WebSettings,
                 demo: DemoVoice | None = None) -> None:
        self.web, self.demo = web_settings, demo
        services.channels[CHANNEL] = web_policy(web_settings)
        self.exchanges = WebExchanges(services.db)
        self._answers: dict[str, Answer] = {}  # inbox key -> the answer under way here
        self._answered: dict[str, asyncio.Event] = {}  # inbox key -> set once its view is in
        super().__init__(services, channel_inbox(services, CHANNEL),
                         WebOutbox(self.exchanges, self._answers))
        self.new_sessions = RateLimiter(NEW_SESSIONS_PER_HOUR, 3600.0)
        self.pages = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                                        autoescape=True, trim_blocks=True, lstrip_blocks=True)
        self.pages.globals["t"] = t
        self.fonts = available_fonts(web_settings.fonts_dir)
        self._font_faces = SafeHtml(font_faces(self.fonts))  # built from constants: no input
        self._auth = (hmac.new(web_settings.token.encode(), b"web-cookie", hashlib.sha256)
                      .hexdigest() if web_settings.token else None)
        self.max_body_bytes = int(web_settings.max_upload_mb * 2**20) + FORM_OVERHEAD_BYTES
        self._expiry: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- the server
    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=self.max_body_bytes)
        app.router.add_get("/", self.page)
        app.router.add_post("/ask", self.ask)
        app.router.add_post("/voice", self.voice)
        app.router.add_get("/audio/{msg}", self.audio)
        app.router.add_get("/fonts/{file}", self.font)
        app.router.add_get("/favicon.ico", _static("favicon.ico", "image/x-icon"))
        app.router.add_get("/favicon.svg", _static("favicon.svg", "image/svg+xml"))
        app.router.add_get("/healthz", _healthz)
        return app

    async def start(self) -> None:
        """Open the inbox (answering what a previous run left) and delete expired exchanges,
        now and every ``EXPIRE_EVERY_S``."""
        await self.replay()
        self._expiry = asyncio.create_task(self._expire_forever(), name="web_expire")

    async def _expire_forever(self) -> None:
        while True:
            before_s = time.time() - self.web.keep_days * 86400
            try:
                n_deleted = await self.exchanges.expire(before_s)
                log.info("web_expired n_exchanges=%d keep_days=%g", n_deleted,
                         self.web.keep_days)
            except driver_errors() as exc:  # the next round tries again
                log.warning("web_expire_failed detail=%s", str(exc).strip()[:200])
            await asyncio.sleep(EXPIRE_EVERY_S)

    async def aclose(self) -> None:
        if self._expiry is not None:
            await stop_tasks({self._expiry}, "web_expire")
        await super().aclose()

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        """With ``BOT_WEB_TOKEN``: the bearer token, the cookie, or ``?token=`` (which sets the
        cookie and reloads without it); else 401. Without: everything passes. The public files
        (:data:`PUBLIC_PATHS`, fonts) pass either way."""
        if self._auth is None or request.path in PUBLIC_PATHS \
                or request.path.startswith("/fonts/"):
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
        try:
            stored = [] if is_new else await self.exchanges.of_chat(chat_id, self.web.history)
            chat_lang = "auto" if is_new else \
                (await self.services.db.get_chat_settings(CHANNEL, chat_id)).lang
        except driver_errors() as exc:
            log.warning("web_unavailable path=/ detail=%s", str(exc).strip()[:200])
            return web.Response(status=503, text="database unavailable, try again")
        page_lang = self._page_lang(request, stored, chat_lang)
        notice = NOTICES.get(request.query.get("notice", ""))
        body = self.pages.get_template("page.html").render(
            exchanges=[page_exchange(e, page_lang) for e in stored], msg=uuid.uuid4().hex,
            page_lang=page_lang, font_faces=self._font_faces, font_families=[
                family for family in FONT_FAMILIES if any(f.family == family
                                                          for f in self.fonts)],
            notice=t(notice, page_lang, max_mb=f"{self.web.max_upload_mb:g}") if notice else "",
            max_chars=self.services.settings.rag.max_query_chars,
            demo_transcript=self.demo.transcript if self.demo else None,
            can_record=bool(self.services.settings.sarvam.api_key))  # speech-to-text needs it
        response = web.Response(text=body, content_type="text/html", headers={
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer"})
        return self._keep(response, token, is_new)

    @staticmethod
    def _page_lang(request: web.Request, stored: list[StoredExchange], chat_lang: str) -> str:
        """The language of the page's own words: the newest reply's, else the chat's
        ``/lang``, else the browser's first language when it is one of the four, else
        English."""
        for exchange in reversed(stored):
            view = ReplyView.from_json(exchange.view)
            if view is not None and view.lang:
                return view.lang
        if chat_lang != "auto":
            return chat_lang
        return _asker_of_browser(request).interface_lang or "en"

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
        except (ValueError, LookupError, HttpProcessingError) as exc:
            # a malformed multipart or url-encoded body, a charset Python does not know, a
            # part's header that does not parse
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
        """Claim the message (a form sent twice has the same ``msg``: answered once), store it
        on the page (a recording with it, until answered, so any replica can answer it),
        answer it in its chat's turn, and send the browser back to the page once answered."""
        token, is_new = self._session(request)
        chat_id = chat_id_of(token)
        msg = msg if isinstance(msg, str) and _MSG_RE.fullmatch(msg) else uuid.uuid4().hex
        shown = excerpt(question, SHOWN_QUESTION_CHARS)  # what the page shows, not all
        if not is_voice:
            with contextlib.suppress(*driver_errors()):  # unreadable: the claim below says so
                msg = await self._fresh_msg_for_another_question(chat_id, msg, shown)
        key = f"{chat_id}:{msg}"
        payload = {**payload, "chat_id": chat_id, "sent_at": time.time(),
                   "language_code": _asker_of_browser(request).language_code,
                   "question": shown if is_voice else ""}
        try:
            if not await self.exchanges.knows(chat_id):  # a new cookie per question: no way out
                remote = self._client(request)
                verdict = self.new_sessions.acquire(remote, self.services.clock())
                if not verdict.is_allowed:
                    log.warning("web_refused reason=new_sessions remote=%s wait_s=%d",
                                remote, verdict.wait_s)
                    return web.Response(
                        status=429, text="too many new sessions from this address: try again "
                        f"in {verdict.wait_s} s", headers={"Retry-After": str(verdict.wait_s)})
            claim = await self.inbox.claim(key, chat_id, json.dumps(payload, ensure_ascii=False))
            if claim is not None:
                await self.exchanges.add(chat_id, key, shown, is_voice=is_voice, upload=audio,
                                         history=self.web.history)
        except driver_errors() as exc:
            log.warning("web_unstored detail=%s", str(exc).strip()[:200])
            return web.Response(status=503, text="database unavailable, try again")
        if claim is None:
            log.info("web_duplicate key=%s", key)
            return self._keep(_see_other("/"), token, is_new)
        answered = self._answered.setdefault(key, asyncio.Event())
        try:
            if not self.inbox.submit(claim, chat_id):
                # shielded: a browser that gives up waiting does not cancel the answer
                await asyncio.shield(self.spawn(payload, claim))
            else:  # replicas: the dispatcher answers it in its chat's turn, on any replica
                await self._wait_answered(key, answered)
        finally:
            self._answered.pop(key, None)
        return self._keep(_see_other(f"/#m-{msg}"), token, is_new)

    async def _fresh_msg_for_another_question(self, chat_id: int, msg: str, shown: str) -> str:
        """``msg``, or a new message id where this session already asked another question
        under it: a page restored by the browser's Back button posts its old ``msg`` with
        whatever is typed next, which would otherwise be taken for the form sent twice and
        dropped (found by a bad-input probe). The same question again keeps ``msg``."""
        earlier = await self.exchanges.get(f"{chat_id}:{msg}")
        if earlier is None or earlier.question == shown:
            return msg
        fresh = uuid.uuid4().hex
        log.info("web_reused_msg chat_id=%s msg=%s another question: taken as %s", chat_id, msg,
                 fresh)
        return fresh

    def _client(self, request: web.Request) -> str:
        """The client's address: the peer's, or behind a trusted proxy (``BOT_WEB_TRUST_PROXY``)
        the last entry of ``X-Forwarded-For``, the one the proxy added."""
        forwarded = request.headers.get("X-Forwarded-For", "")
        if self.web.trust_proxy and forwarded.strip():
            return forwarded.split(",")[-1].strip()[:64]
        return request.remote or "-"

    async def _wait_answered(self, key: str, answered: asyncio.Event) -> None:
        """Until ``key`` is answered here (``answered``) or its view is in the database
        (another replica answered it), at most ``REPLICA_WAIT_S``."""
        deadline = time.monotonic() + REPLICA_WAIT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(answered.wait()), REPLICA_POLL_S)
                return
            with contextlib.suppress(*driver_errors()):
                stored = await self.exchanges.get(key)
                if stored is None or stored.is_done:
                    return

    async def audio(self, request: web.Request) -> web.StreamResponse:
        """The spoken reply of one of this session's messages (OGG/Opus), else 404."""
        token, is_new = self._session(request)
        msg = request.match_info["msg"]
        ogg = None if is_new or not _MSG_RE.fullmatch(msg) else \
            await self.exchanges.voice(f"{chat_id_of(token)}:{msg}")
        if ogg is None:
            raise web.HTTPNotFound(text="no such spoken reply in this session")
        return web.Response(body=ogg, content_type="audio/ogg",
                            headers={"Cache-Control": "private, max-age=3600"})

    async def font(self, request: web.Request) -> web.StreamResponse:
        """One of the web fonts present (``bot.web.assets``), else 404."""
        name = request.match_info["file"]
        if not any(f.file == name for f in self.fonts):
            raise web.HTTPNotFound(text=f"no such font: the page serves "
                                   f"{', '.join(f.file for f in WEB_FONTS)} when installed")
        return web.FileResponse(self.web.fonts_dir / name, headers={
            "Content-Type": "font/ttf", "Cache-Control": f"public, max-age={FONT_CACHE_S}"})

    # ---------------------------------------------------------------- the lifecycle's hooks
    def asker_of(self, payload: dict[str, Any], claim: Claim) -> Asker:
        """The session (``chat_id``) that sent ``payload``; its browser's language."""
        chat_id = int(payload["chat_id"])
        return Asker(CHANNEL, chat_id, user_id=chat_id, message_key=claim.key,
                     language_code=payload.get("language_code"))

    def age_s(self, payload: dict[str, Any]) -> float | None:
        return time.time() - float(payload.get("sent_at", time.time()))

    def begin(self, payload: dict[str, Any], claim: Claim) -> Answering:
        """The message, with its :class:`Answer` to collect what is delivered."""
        message = super().begin(payload, claim)
        message.note = self._answers.setdefault(claim.key, Answer(claim.key))
        return message

    async def run(self, message: Answering) -> None:
        """The lifecycle (``MessageLifecycle.run``), between storing the message on the page
        (if a crash lost it between the claim and that) and writing its view once finished
        (not when the answer was deferred: it is answered again)."""
        key, payload = message.claim.key, message.payload
        try:
            with contextlib.suppress(*driver_errors()):  # the answer matters more
                await self.exchanges.add(
                    message.asker.chat_id, key,
                    excerpt(str(payload.get("question") or payload.get("text", "")),
                            SHOWN_QUESTION_CHARS),
                    is_voice=payload.get("type") == "voice", history=self.web.history)
            await super().run(message)
            if message.claim.deferred is None:
                await self._write_view(message.note)
        finally:
            self._answers.pop(key, None)
            if (answered := self._answered.get(key)) is not None:
                answered.set()

    async def after_reply(self, message: Answering, reply: Reply) -> None:
        message.note.reply = reply

    def after_error_reply(self, message: Answering) -> None:
        message.note.is_error = True

    async def reply_to(self, asker: Asker, payload: dict[str, Any]) -> Reply:
        """The reply to one message, from the chat layer."""
        if payload.get("type") == "voice":
            key = asker.message_key or ""

            async def fetch() -> bytes:
                data = await self.exchanges.upload(key)
                if data is None:
                    raise VoiceDownloadError("the recording was lost: it never reached the "
                                             "database, or was answered already")
                return data

            size = payload.get("bytes")
            return await answer_voice(self.services, asker, VoiceNote(
                size if isinstance(size, int) else None, None, fetch))
        return await reply_to_text(self.services, asker, str(payload.get("text", "")))

    async def _write_view(self, answer: Answer) -> None:
        """What the page shows of ``answer``, into the database: for a decision, from the
        decision as stored now (the spoken reply's stages included), in the reply's language
        (``Reply.lang``); else the texts delivered (a command, a notice, an apology). Logged,
        never raised, when the database fails."""
        reply, view = answer.reply, ReplyView(replies=list(answer.texts))
        try:
            if answer.is_error:
                view.kind = "error"
            elif reply is not None:
                view.kind, view.lang = kind_of(reply.status), reply.lang
                stored = None if reply.decision_id is None else \
                    await self.services.db.decision(reply.decision_id)
                if stored is not None and reply.lang and answer.texts:
                    index = self.services.pipeline.index
                    passages = {c.passage_id: index.passages[label].text
                                for c in stored.result.citations
                                if (label := index.label_of(c.passage_id)) is not None}
                    view = decided_view(stored.result, reply.lang, stored.id, stored.transcript,
                                        passages)
            await self.exchanges.set_view(answer.key, view.to_json(), is_done=True)
        except driver_errors() as exc:
            log.warning("web_view_unstored key=%s detail=%s", answer.key,
                        str(exc).strip()[:200])


def _asker_of_browser(request: web.Request) -> Asker:
    """The browser's first ``Accept-Language`` tag (``hi-IN``, at most 16 characters; None when
    absent) as an :class:`Asker`'s ``language_code``."""
    first = request.headers.get("Accept-Language", "").split(",")[0].split(";")[0].strip()
    return Asker(CHANNEL, 0, language_code=first[:16] or None)


def _static(name: str, content_type: str) -> Callable[[web.Request],
                                                       Awaitable[web.StreamResponse]]:
    data = (STATIC / name).read_bytes()

    async def serve(_request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, content_type=content_type,
                            headers={"Cache-Control": "public, max-age=86400"})

    return serve


def _see_other(location: object) -> web.Response:
    """303 to ``location`` (a path, or a URL object): after a form, the page is fetched anew."""
    return web.Response(status=303, headers={"Location": str(location)})


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


@asynccontextmanager
async def serving(services: Services, web_settings: WebSettings,
                  demo: DemoVoice | None = None) -> AsyncIterator[tuple[WebFrontEnd, str]]:
    """The page listening on ``host``:``port`` (0: any free port); yields the front end and its
    base URL (``http://host:port``)."""
    front = WebFrontEnd(services, web_settings, demo)
    await front.start()
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


async def _serve(settings: Settings, web_settings: WebSettings, demo: DemoVoice | None) -> None:
    services = await Services.open(settings)
    try:
        async with serving(services, web_settings, demo) as (_front, url):
            auth = "token" if web_settings.token else "none (loopback)"
            voice = f"demo (Sarvam stand-in at {demo.base_url}, scripted transcripts)" if demo \
                else "sarvam" if settings.sarvam.api_key else "off (no SARVAM_API_KEY)"
            log.info("web_listening url=%s/ auth=%s voice=%s", url, auth, voice)
            print(f"web: {url}/ (auth {auth}; voice {voice})", flush=True)
            await until_signalled()
    finally:
        await services.close()


def run_web(settings: Settings, web_settings: WebSettings, demo: DemoVoice | None = None) -> int:
    """Serve the page until SIGINT/SIGTERM; the exit code (2: it cannot start). ``demo``: the
    Sarvam stand-in ``settings`` already speak through (``--demo-voice``, ``bot.web.demo``),
    which the page names."""
    try:
        asyncio.run(_serve(settings, web_settings, demo))
    except OSError as exc:  # the port is taken, the host is not this machine's
        print(f"error: cannot listen on {web_settings.host}:{web_settings.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
