"""The WhatsApp front end: the same assistant on the WhatsApp Cloud API.

    python -m bot --whatsapp

An aiohttp web server (``WHATSAPP_LISTEN``:``WHATSAPP_PORT``, else ``$PORT``, else 8080) takes
Meta's webhook at ``WHATSAPP_WEBHOOK_PATH`` (``/webhook``):

- ``GET``: the subscription check: ``hub.mode=subscribe`` with the right ``hub.verify_token``
  echoes ``hub.challenge``; anything else is 403.
- ``POST``: the raw body's HMAC-SHA256 with ``WHATSAPP_APP_SECRET`` must equal the
  ``X-Hub-Signature-256`` header (constant-time compare) before anything is parsed: otherwise
  403 and nothing is stored. Each message (id ``wamid`` and JSON) is then claimed in the
  durable inbox every channel shares (``bot.chat.inbox``: a redelivery, even after a restart,
  is dropped), the answer is 200 at once and the message is handled in the background.
  Messages claimed but not answered when the process died are handled at the next start; one
  whose reply was already on its way (``sending``) is not sent again; one sent more than
  ``BOT_INBOX_MAX_AGE_S`` ago (Meta redelivers for days after an outage) gets the "reached me
  too late" apology instead of an answer, as on Telegram.

This module only converts: ``text`` goes to ``bot.chat.questions.reply_to_text`` (commands
also as bare words: ``why``, ``help``, ``new``, ``lang hi``); ``audio`` (voice notes and audio
files) is looked up (``GET /{media-id}``) and downloaded with the bearer token by the voice note's
``fetch``; a ``reaction`` is logged, not answered; any other type gets the "I understand text
questions and voice notes" notice. Replies are delivered by ``bot.chat.delivery`` through
:class:`WhatsAppOutbox`: ``POST /{phone-number-id}/messages`` in WhatsApp's formatting
(``bot.whatsapp.markup``), split at 4,096 characters, a voice note uploaded with ``POST
/{phone-number-id}/media`` and sent as ``audio`` after the text. Allow-list
(``WHATSAPP_ALLOWED_NUMBERS``), size limit (``WHATSAPP_MAX_MEDIA_MB``), rate limit and voice
on/off are the chat layer's (``bot.chat.policy``). Graph faults are handled by
``bot.whatsapp.graph``; a reply that still fails (token, permission, the 24-hour window,
retries spent) is logged and its outcome stored, never retried forever.

Every message's inbox row keeps the chat id (the sender's number), the decision id and the
outcome; the decision log line is followed by ``whatsapp_reply channel=whatsapp chat_id=…``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, nullcontext
from hashlib import sha256
from typing import Any, Literal

from aiohttp import web

from bot.chat.commands import notice_reply
from bot.chat.delivery import DeliveryError, OnWire
from bot.chat.inbox import Claim, channel_inbox
from bot.chat.lifecycle import MessageLifecycle, until_signalled
from bot.chat.policy import ChannelPolicy
from bot.chat.questions import answer_voice, reply_to_text
from bot.chat.render import Text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, VoiceNote
from bot.chat.voice_cache import VoiceAudio
from bot.errors import SettingsError, VoiceDownloadError
from bot.settings import Settings
from bot.whatsapp.graph import GraphClient, GraphError
from bot.whatsapp.markup import to_whatsapp
from bot.whatsapp.settings import WhatsAppSettings
from storage.backend import driver_errors

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
"""This channel's name, as stored with every row."""
MAX_WA_ID_DIGITS = 15
"""Longest wa_id: a phone number in international form has at most 15 digits (ITU-T E.164)."""
_LONE_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


def _scrub(value: Any) -> Any:
    """``value`` (parsed JSON) with lone surrogates (``"\\ud83d"``: valid JSON, but no UTF-8
    can store or send them) replaced by U+FFFD in every string, keys included.

    Raises:
        RecursionError: nesting deeper than Python's recursion limit.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def _items(value: Any, key: str) -> list[dict[str, Any]]:
    """The objects in ``value[key]`` (``messages``, ``statuses``); others logged and left out."""
    items = value.get(key) or []
    if not isinstance(items, list):
        log.warning("webhook_skipped reason=not_a_list key=%s", key)
        return []
    for item in items:
        if not isinstance(item, dict):
            log.warning("webhook_skipped reason=not_an_object key=%s item=%r", key,
                        str(item)[:80])
    return [item for item in items if isinstance(item, dict)]


def _is_wa_id(sender: str) -> bool:
    """``sender`` is a wa_id: 1 to ``MAX_WA_ID_DIGITS`` ASCII digits (``str.isdigit`` alone
    also takes ``²`` and ``٩``, which ``int`` rejects or reads as another number)."""
    return 0 < len(sender) <= MAX_WA_ID_DIGITS and sender.isascii() and sender.isdigit()


def _log_status(status: dict[str, Any]) -> None:
    """A delivery status webhook: ``failed`` ones (Meta reports some refusals, e.g. the 24-hour
    window, code 131047, only this way) as a warning with their error codes, others at debug."""
    if status.get("status") != "failed":
        log.debug("whatsapp_status message_id=%s status=%s", status.get("id"), status.get("status"))
        return
    errors = [e for e in status.get("errors") or [] if isinstance(e, dict)] or [{}]
    log.warning("whatsapp_delivery_failed chat_id=%s message_id=%s code=%s title=%s",
                status.get("recipient_id"), status.get("id"), errors[0].get("code"),
                errors[0].get("title") or errors[0].get("message"))


def _age_s(message: dict[str, Any]) -> float | None:
    """Seconds since the user sent ``message`` (its ``timestamp``, Unix seconds), else None."""
    try:
        return time.time() - float(message["timestamp"])
    except (KeyError, TypeError, ValueError):
        return None


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


# ------------------------------------------------------------------------ the front end
def whatsapp_policy(wa: WhatsAppSettings) -> ChannelPolicy:
    """WhatsApp's rules for the chat layer: ``WHATSAPP_ALLOWED_NUMBERS``,
    ``WHATSAPP_MAX_MEDIA_MB``."""
    return ChannelPolicy(CHANNEL, frozenset(int(n) for n in wa.allowed_numbers),
                         max_voice_bytes=int(wa.max_media_mb * 2**20))


class WhatsAppOutbox:
    """How replies leave on WhatsApp (the chat layer's ``Outbox``): text in WhatsApp's markup
    split at 4,096 characters, voice notes uploaded and sent as ``audio``; no busy indicator."""

    def __init__(self, graph: GraphClient) -> None:
        self.graph = graph

    async def send_text(self, asker: Asker, texts: list[Text], on_wire: OnWire) -> list[int]:
        pieces = [piece for text in texts for piece in to_whatsapp(text)]
        await on_wire()
        for n, piece in enumerate(pieces):
            try:
                await self.graph.send_text(str(asker.chat_id), piece)
            except GraphError as exc:
                log.warning("whatsapp_send_failed chat_id=%s kind=%s status=%d code=%s "
                            "attempts=%d sent=%d/%d detail=%s", asker.chat_id, exc.kind,
                            exc.status, exc.code, exc.n_attempts, n, len(pieces), exc)
                raise DeliveryError(exc.kind, str(exc), n_sent=n) from exc
        return []  # wamids are text: no numeric ids to remember

    async def send_voice(self, asker: Asker, audio: VoiceAudio, on_wire: OnWire) -> str:
        try:
            media_id = await self.graph.upload_audio(audio.ogg)
            await self.graph.send_audio(str(asker.chat_id), media_id)
        except GraphError as exc:
            raise DeliveryError(exc.kind, str(exc)) from exc
        return f"media {media_id}, {len(audio.ogg)} bytes, {audio.duration_s:.1f} s"

    def busy(self, asker: Asker, activity: Literal["typing", "recording"]) -> nullcontext:
        return nullcontext()


class WhatsAppFrontEnd(MessageLifecycle):
    """The webhook server; each message claimed is answered by the chat layer's lifecycle
    (``bot.chat.lifecycle.MessageLifecycle``: stale check, answer, deliver, defer or error
    reply, finish; log lines ``whatsapp_reply``, ``whatsapp_error``). :func:`serving` runs it."""

    def __init__(self, services: Services, wa: WhatsAppSettings,
                 graph: GraphClient | None = None) -> None:
        self.services, self.wa = services, wa
        self.graph = graph or GraphClient(
            token=wa.token, phone_number_id=wa.phone_number_id, base_url=wa.api_base,
            version=wa.api_version, timeout_s=wa.timeout_s, max_attempts=wa.max_attempts,
            backoff_base_s=wa.backoff_base_s, max_backoff_s=wa.max_backoff_s)
        services.channels[CHANNEL] = whatsapp_policy(wa)
        super().__init__(services, channel_inbox(services, CHANNEL), WhatsAppOutbox(self.graph))

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(self.wa.webhook_path, self.verify)
        app.router.add_post(self.wa.webhook_path, self.receive)
        app.router.add_get("/healthz", _healthz)
        return app

    async def verify(self, request: web.Request) -> web.Response:
        """Meta's subscription check (``hub.mode``, ``hub.verify_token``, ``hub.challenge``)."""
        query = request.query
        token = query.get("hub.verify_token", "")
        if query.get("hub.mode") == "subscribe" and self.wa.verify_token and \
                hmac.compare_digest(token.encode(), self.wa.verify_token.encode()):
            log.info("webhook_verified")
            return web.Response(text=query.get("hub.challenge", ""))
        log.warning("webhook_verify_refused mode=%r", query.get("hub.mode", "")[:80])
        return web.Response(status=403, text="verification failed")

    def is_signed(self, body: bytes, header: str) -> bool:
        """``header`` is ``sha256=<hex HMAC-SHA256 of body with the app secret>``."""
        expected = "sha256=" + hmac.new(self.wa.app_secret.encode(), body, sha256).hexdigest()
        return hmac.compare_digest(header.encode(), expected.encode())

    async def receive(self, request: web.Request) -> web.Response:
        """One webhook POST: signature, then claim each message and handle it in the
        background; 200 as soon as the claims are stored."""
        body = await request.read()
        if not self.is_signed(body, request.headers.get("X-Hub-Signature-256", "")):
            log.warning("webhook_refused reason=bad_signature bytes=%d", len(body))
            return web.Response(status=403, text="bad signature")
        try:
            payload = _scrub(json.loads(body))
            values = [change["value"] for entry in payload.get("entry", [])
                      for change in entry.get("changes", []) if change.get("field") == "messages"]
        except (ValueError, AttributeError, KeyError, TypeError, RecursionError) as exc:
            log.warning("webhook_refused reason=malformed detail=%s", str(exc)[:200])
            return web.Response(status=400, text="malformed payload")
        try:
            for value in values:
                await self._take(value)
        except driver_errors() as exc:  # PostgreSQL restarting: Meta redelivers a non-200
            log.warning("webhook_unstored status=503 detail=%s", str(exc).strip()[:200])
            return web.Response(status=503, text="database unavailable, retry")
        return web.Response(text="ok")

    async def _take(self, value: Any) -> None:
        """Claim and schedule the messages of one ``changes[].value``; parts not shaped as
        Meta sends them are logged (``webhook_skipped``) and skipped, so they neither fail the
        POST (Meta would redeliver it for days) nor keep the other messages from being
        claimed."""
        metadata = value.get("metadata") if isinstance(value, dict) else None
        number_id = metadata.get("phone_number_id") if isinstance(metadata, dict) else None
        if number_id != self.wa.phone_number_id:
            log.warning("webhook_skipped reason=other_number phone_number_id=%r", number_id)
            return
        for status in _items(value, "statuses"):
            _log_status(status)
        for message in _items(value, "messages"):
            wamid = message.get("id")
            sender = message.get("from")
            sender = str(sender) if isinstance(sender, str | int) else ""
            if not isinstance(wamid, str) or not wamid or not _is_wa_id(sender):
                log.warning("webhook_skipped reason=no_id_or_sender id=%r from=%r",
                            str(wamid)[:80], sender[:80])
                continue
            message = {**message, "from": sender}
            claim = await self.inbox.claim(wamid, int(sender),
                                           json.dumps(message, ensure_ascii=False))
            if claim is None:
                log.info("whatsapp_duplicate message_id=%s chat_id=%s", wamid, sender)
                continue
            if not self.inbox.submit(claim, int(sender)):  # replicas: in the chat's turn
                self.spawn(message, claim)

    # ------------------------------------------------------------ the lifecycle's hooks
    def asker_of(self, message: dict[str, Any], claim: Claim) -> Asker:
        """The sender of ``message``: its ``from`` (wa_id) is the chat and the user."""
        wa_id = int(message["from"])
        return Asker(CHANNEL, wa_id, user_id=wa_id, message_key=message["id"])

    def age_s(self, message: dict[str, Any]) -> float | None:
        return _age_s(message)

    async def reply_to(self, asker: Asker, message: dict[str, Any]) -> Reply:
        """The reply to one message, from the chat layer."""
        services, kind = self.services, message.get("type")
        if kind == "text":
            text = message.get("text")
            text = text.get("body") if isinstance(text, dict) else None
            text = text if isinstance(text, str) else ""  # not shaped as Meta sends: empty
            return await reply_to_text(services, asker, text, bare_commands=True)
        if kind == "audio":
            audio = message.get("audio")
            media_id = str((audio if isinstance(audio, dict) else {}).get("id", ""))
            note = VoiceNote(None, None, fetch=lambda: self._fetch_audio(media_id))
            return await answer_voice(services, asker, note)
        if kind == "reaction":  # a 👍 on an answer, or its removal: feedback, not a question
            reaction = message.get("reaction")
            reaction = reaction if isinstance(reaction, dict) else {}
            log.info("reaction frontend=whatsapp chat_id=%d message_id=%r emoji=%r",
                     asker.chat_id, reaction.get("message_id"), reaction.get("emoji"))
            return Reply([])
        log.info("unsupported_message frontend=whatsapp chat_id=%d kind=%s", asker.chat_id, kind)
        return await notice_reply(services, asker, "unsupported_message")

    async def _fetch_audio(self, media_id: str) -> bytes:
        """Look up and download ``media_id``; once more with a fresh URL if it expired.

        Raises:
            VoiceDownloadError: too big, or the media could not be fetched.
        """
        max_bytes = int(self.wa.max_media_mb * 2**20)
        try:
            try:
                return await self.graph.download(await self.graph.media(media_id), max_bytes)
            except GraphError as exc:
                if exc.kind != "media_expired":
                    raise
                log.info("media_expired media_id=%s: looking it up again", media_id)
                return await self.graph.download(await self.graph.media(media_id), max_bytes)
        except GraphError as exc:
            raise VoiceDownloadError(str(exc), is_too_big=exc.kind == "too_big",
                                     max_mb=self.wa.max_media_mb) from exc

    async def aclose(self) -> None:
        """The lifecycle's bounded close (``MessageLifecycle.aclose``), then the Graph
        client's."""
        await super().aclose()
        await self.graph.aclose()


@asynccontextmanager
async def serving(services: Services, wa: WhatsAppSettings,
                  graph: GraphClient | None = None) -> AsyncIterator[tuple[WhatsAppFrontEnd, str]]:
    """The front end listening on ``wa.listen``:``wa.port`` (0: any free port); yields it and
    its base URL (``http://host:port``)."""
    front = WhatsAppFrontEnd(services, wa, graph)
    await front.replay()
    runner = web.AppRunner(front.make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, wa.listen, wa.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield front, f"http://{wa.listen}:{port}"
    finally:
        await runner.cleanup()
        await front.aclose()


async def _serve(settings: Settings, wa: WhatsAppSettings) -> None:
    services = await Services.open(settings)
    try:
        async with serving(services, wa) as (_front, url):
            log.info("whatsapp_listening url=%s%s graph=%s/%s phone_number_id=%s", url,
                     wa.webhook_path, wa.api_base, wa.api_version, wa.phone_number_id)
            await until_signalled()
    finally:
        await services.close()


def run_whatsapp(settings: Settings, env: Mapping[str, str] | None = None) -> int:
    """Serve the WhatsApp webhook until SIGINT/SIGTERM; the exit code (2: settings missing)."""
    try:
        wa = WhatsAppSettings.from_env(env)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = wa.missing()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    asyncio.run(_serve(settings, wa))
    return 0

