"""Thin PTB handlers: turn the update into the chat layer's types → call it → deliver.

Nothing here decides anything about answers, commands, access or limits; see ``bot.chat``.
"""

from __future__ import annotations

import logging
from functools import partial

from telegram import Audio, Document, Update, Voice
from telegram.error import Conflict, Forbidden, NetworkError, RetryAfter, TelegramError
from telegram.ext import CallbackContext, ExtBot

from bot.chat.commands import notice_reply
from bot.chat.inbox import Claim
from bot.chat.lifecycle import answer_error, defer_logged, deliver_answer
from bot.chat.questions import answer_voice, reply_to_text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, VoiceNote
from bot.errors import VoiceDownloadError
from bot.telegram.inbox import retry_after_s
from bot.telegram.incoming import (
    addresses_command,
    asker_of,
    is_command,
    is_for_bot,
    message_kind,
    question_text,
)
from bot.telegram.outbox import TelegramOutbox

log = logging.getLogger(__name__)


class BotContext(CallbackContext[ExtBot, dict, dict, dict]):
    """PTB's context with typed access to the :class:`Services` opened in ``post_init``, the
    outbox, and the inbox claim of the update being handled."""

    @classmethod
    def from_update(cls, update: object, application) -> BotContext:
        """PTB's per-update context, remembering which update it serves (for the inbox)."""
        context = super().from_update(update, application)
        context._update_id = update.update_id if isinstance(update, Update) else None
        return context

    @property
    def services(self) -> Services:
        return self.bot_data["services"]

    @property
    def outbox(self) -> TelegramOutbox:
        return self.bot_data["outbox"]

    @property
    def claim(self) -> Claim | None:
        """The inbox claim of the update being handled (None without the durable inbox)."""
        return self.bot_data.get("claims", {}).get(getattr(self, "_update_id", None))


async def on_text(update: Update, context: BotContext) -> None:
    """Typed text: a command (in groups ``/cmd``, ``/cmd@bot``), or a question (in groups only
    when it mentions or replies to the bot)."""
    message = update.effective_message
    if is_command(message):
        if not addresses_command(message, context.bot.username):
            return
        text = message.text
    else:
        text = question_text(message, context.bot.username, context.bot.id)
        if text is None:
            return
    asker = asker_of(message, context.bot.id)
    reply = await reply_to_text(context.services, asker, text,
                                busy=partial(context.outbox.busy, asker, "typing"))
    await send(context, asker, reply)


async def on_voice(update: Update, context: BotContext) -> None:
    """A voice note, audio file or audio document (an .ogg sent as a file) (in groups only as a
    reply to the bot or with a caption that mentions it)."""
    message = update.effective_message
    if not is_for_bot(message, context.bot.username, context.bot.id):
        return
    media = message.voice or message.audio or message.document
    # to_dict() gives the duration in seconds as sent; the attribute warns that it becomes a
    # timedelta in PTB 23.
    note = VoiceNote(media.file_size, media.to_dict().get("duration"),
                     fetch=partial(download, media))
    asker = asker_of(message, context.bot.id)
    reply = await answer_voice(context.services, asker, note,
                               busy=partial(context.outbox.busy, asker, "typing"))
    await send(context, asker, reply)


async def on_other(update: Update, context: BotContext) -> None:
    """A message no other handler took (a sticker, a photo, a video note, a non-audio document,
    ...): say what the bot understands, and log it. In groups only when the message is
    addressed to the bot (a reply to the bot, a mention in a caption); others are ignored."""
    message = update.effective_message
    if not is_for_bot(message, context.bot.username, context.bot.id):
        return
    asker = asker_of(message, context.bot.id)
    log.info("unsupported_message channel=telegram chat_id=%d kind=%s", asker.chat_id,
             message_kind(message))
    await send(context, asker, await notice_reply(context.services, asker,
                                                  "unsupported_message"))


async def send(context: BotContext, asker: Asker, reply: Reply) -> None:
    """Deliver ``reply`` and note its outcome on the update's claim (the chat layer's
    ``bot.chat.lifecycle.deliver_answer``)."""
    await deliver_answer(context.services, context.outbox, asker, reply, context.claim)


async def download(media: Voice | Audio | Document) -> bytes:
    """getFile, then the file's bytes (in memory).

    Raises:
        VoiceDownloadError: Telegram refused or failed either step (``is_too_big`` when
            getFile answered "file is too big": over the 20 MB bots may download).
    """
    try:
        file = await media.get_file()
        return bytes(await file.download_as_bytearray())
    except TelegramError as exc:
        raise VoiceDownloadError(f"{type(exc).__name__}: {exc.message}",
                                 is_too_big="file is too big" in exc.message.lower()) from exc
    except RuntimeError as exc:  # PTB: getFile answered without a file_path (optional field)
        raise VoiceDownloadError(f"{type(exc).__name__}: {exc}") from exc


async def on_error(update: object, context: BotContext) -> None:
    """Log every failure as one line; when something broke while answering a message, answer
    it as every channel does (``bot.chat.lifecycle.answer_error``: the "something went wrong"
    reply in the chat's ``/lang``, else the user's language, through the outbox, the inbox
    outcome ``error``)."""
    error = context.error
    message = update.effective_message if isinstance(update, Update) else None
    chat_id = message.chat_id if message else None
    claim = context.claim
    if claim is not None and error is not None and \
            defer_logged(claim, error, "telegram", f"chat_id={chat_id} key={claim.key}"):
        return
    if claim is not None and isinstance(error, NetworkError) and not context.application.running:
        log.warning("reply_failed_at_shutdown chat_id=%s detail=%s: left unfinished in the inbox",
                    chat_id, str(error).strip()[:200])
        claim.leave_open("reply_failed_at_shutdown")
        return
    if isinstance(error, Forbidden):
        log.warning("telegram.forbidden chat_id=%s detail=%s (blocked by the user or removed "
                    "from the chat)", chat_id, error.message)
        return
    if isinstance(error, Conflict):
        log.error("telegram.conflict detail=%s: another process is polling with this token or a "
                  "webhook is set; run exactly one instance", error.message)
        return
    if isinstance(error, NetworkError) and update is None:
        log.warning("telegram.network_error while polling detail=%s", error)
        return
    if isinstance(error, RetryAfter):
        log.warning("telegram.retry_after_gave_up chat_id=%s retry_after_s=%g: still 429 after "
                    "TELEGRAM_MAX_RETRIES retries", chat_id, retry_after_s(error))
        return
    log.error("unhandled_error chat_id=%s update=%s", chat_id, type(update).__name__,
              exc_info=error)
    if message is None:
        return
    try:  # the chat's /lang, the outbox, outcome "error": as on every channel
        await answer_error(context.services, context.outbox, asker_of(message, context.bot.id),
                           claim)
    except Exception as exc:
        log.warning("error_reply_failed chat_id=%s kind=%s detail=%s", chat_id,
                    type(exc).__name__, str(exc).strip()[:200])
