"""Thin PTB handlers: extract plain data from the update → call a service function → send.

Nothing here decides anything about answers; see ``bot.questions`` and ``bot.commands``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator
from functools import partial
from html import escape

from telegram import Audio, Document, Message, ReplyParameters, Update, Voice
from telegram.constants import ChatAction, ChatType
from telegram.error import Conflict, Forbidden, NetworkError, RetryAfter, TelegramError
from telegram.ext import ApplicationHandlerStop, CallbackContext, ExtBot

from bot.commands import (
    help_reply,
    lang_reply,
    mode_reply,
    notice_reply,
    voice_command_reply,
    why_reply,
)
from bot.errors import VoiceDownloadError
from bot.followups import reply_kind
from bot.inbox import UpdateInbox, replying_to
from bot.incoming import (
    asker_of,
    command_argument,
    is_for_bot,
    is_reply_to_bot,
    message_kind,
    question_text,
    unknown_command,
)
from bot.messages import t
from bot.questions import answer_text, answer_voice
from bot.services import Asker, Reply, Services, VoiceNote
from bot.update_context import Busy
from bot.voice_reply import make_voice, record_voice
from rag.types import Stage
from storage.inbox import record_sent

log = logging.getLogger(__name__)


class BotContext(CallbackContext[ExtBot, dict, dict, dict]):
    """PTB's context with typed access to the :class:`Services` opened in ``post_init``."""

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
    def inbox(self) -> UpdateInbox | None:
        """The durable inbox (None in tests that build the Application without it)."""
        return self.bot_data.get("inbox")

    @property
    def update_id(self) -> int | None:
        """The id of the update being handled; None for an error without one."""
        return getattr(self, "_update_id", None)


# ------------------------------------------------------------------------------- questions


async def on_text(update: Update, context: BotContext) -> None:
    """A typed question (in groups only when it mentions or replies to the bot)."""
    message = update.effective_message
    text = question_text(message, context.bot.username, context.bot.id)
    if text is None:
        return
    asker = asker_of(message)
    kind = reply_kind(text) if is_reply_to_bot(message, context.bot.id) else None
    if kind == "why":  # "why?" as a reply to an answer: how that answer was decided
        reply = await why_reply(context.services, asker, message.reply_to_message.message_id)
    elif kind == "follow_up":  # "tell me more": no context to continue from
        reply = await notice_reply(context.services, asker, "full_question")
    else:
        reply = await answer_text(context.services, asker, text, busy=typing(context, asker))
    await send(context, asker, reply)
    await speak(context, asker, reply)


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
    asker = asker_of(message)
    reply = await answer_voice(context.services, asker, note, busy=typing(context, asker))
    await send(context, asker, reply)
    await speak(context, asker, reply)


async def on_other(update: Update, context: BotContext) -> None:
    """A message no other handler took (an unknown command, a sticker, a photo, a video note, a
    non-audio document, ...): say what the bot understands, and log it. In groups only when
    the message is addressed to the bot (``/foo@bot``, a reply to the bot, a mention in a
    caption); others are ignored."""
    message = update.effective_message
    if not is_for_bot(message, context.bot.username, context.bot.id):
        return
    asker = asker_of(message)
    command = unknown_command(message)
    log.info("unsupported_message chat_id=%d kind=%s command=%s", asker.chat_id,
             message_kind(message), command or "-")
    if command is not None:
        reply = await notice_reply(context.services, asker, "unknown_command", command=command)
    else:
        reply = await notice_reply(context.services, asker, "unsupported_message")
    await send(context, asker, reply)


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


# -------------------------------------------------------------------------------- commands


async def on_help(update: Update, context: BotContext) -> None:
    """/start and /help."""
    asker = asker_of(update.effective_message)
    await send(context, asker, await help_reply(context.services, asker))


async def on_why(update: Update, context: BotContext) -> None:
    asker = asker_of(update.effective_message)
    await send(context, asker, await why_reply(context.services, asker))


async def on_lang(update: Update, context: BotContext) -> None:
    asker = asker_of(update.effective_message)
    reply = await lang_reply(context.services, asker, command_argument(context.args))
    await send(context, asker, reply)


async def on_mode(update: Update, context: BotContext) -> None:
    asker = asker_of(update.effective_message)
    reply = await mode_reply(context.services, asker, command_argument(context.args))
    await send(context, asker, reply)


async def on_voice_setting(update: Update, context: BotContext) -> None:
    """/voice on|off|auto."""
    asker = asker_of(update.effective_message)
    reply = await voice_command_reply(context.services, asker, command_argument(context.args))
    await send(context, asker, reply)


# ---------------------------------------------------------------------- access and errors


async def allow_list_gate(update: Update, context: BotContext) -> None:
    """Runs before every other handler when ``BOT_ALLOWED_USER_IDS`` is set: updates from other
    users stop here (in private chats they are told the bot is private)."""
    user = update.effective_user
    if user is not None and user.id in context.services.settings.bot.allowed_user_ids:
        return
    message = update.effective_message
    services = context.services
    # its refusals count against the rate limit too: a stranger cannot make the bot flood
    is_limited = (user is not None
                  and not services.limiter.acquire(user.id, services.clock()).is_allowed)
    log.warning("not_allowed user_id=%s chat_id=%s reply=%s", user.id if user else None,
                message.chat_id if message else None, "dropped" if is_limited else "refusal")
    if message is not None and message.chat.type == ChatType.PRIVATE and not is_limited:
        lang = asker_of(message).interface_lang or "en"
        await message.reply_text(escape(t("not_allowed", lang)))
    raise ApplicationHandlerStop


async def on_error(update: object, context: BotContext) -> None:
    """Log every failure as one line; tell the user when something broke while answering."""
    error = context.error
    message = update.effective_message if isinstance(update, Update) else None
    chat_id = message.chat_id if message else None
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
        log.warning("telegram.retry_after chat_id=%s detail=%s: gave up after "
                    "TELEGRAM_MAX_RETRIES", chat_id, error.message)
        return
    log.error("unhandled_error chat_id=%s update=%s", chat_id, type(update).__name__,
              exc_info=error)
    if message is not None:
        lang = asker_of(message).interface_lang or "en"
        try:
            await context.bot.send_message(chat_id, escape(t("error", lang)))
        except TelegramError as exc:
            log.warning("error_reply_failed chat_id=%s detail=%s", chat_id, exc)


# ---------------------------------------------------------------------------- sending


def typing(context: BotContext, asker: Asker) -> Busy:
    """"typing…" in the asker's chat (:func:`chat_action`), as the ``busy`` indicator of a
    question: the per-update step (``bot.update_context.run_update``) shows it only once the
    rate limit let the question through, so a refused message never shows it."""
    return partial(chat_action, context, asker.chat_id)


@contextlib.asynccontextmanager
async def chat_action(context: BotContext, chat_id: int,
                      action: str = ChatAction.TYPING) -> AsyncIterator[None]:
    """Show ``action`` in the chat while the block runs, re-sent every
    ``TELEGRAM_CHAT_ACTION_INTERVAL_S`` seconds (an action lasts about 5 s). Failures to send
    it are logged and never stop the block."""
    interval_s = context.services.settings.telegram.chat_action_interval_s

    async def keep_showing() -> None:
        while True:
            try:
                await context.bot.send_chat_action(chat_id, action)
            except Forbidden:
                return
            except TelegramError as exc:
                log.debug("chat_action_failed chat_id=%s detail=%s", chat_id, exc)
            await asyncio.sleep(interval_s)

    task = asyncio.create_task(keep_showing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def send(context: BotContext, asker: Asker, reply: Reply) -> list[Message]:
    """Send the reply's messages in order, the first quoting the question; record how long
    sending took (ms) on the decision, if any."""
    start = time.perf_counter()
    quote = (ReplyParameters(asker.message_id, allow_sending_without_reply=True)
             if asker.message_id is not None else None)
    inbox, update_id = context.inbox, context.update_id
    if inbox is not None and update_id is not None:
        inbox.note(update_id, f"replied decision_id={reply.decision_id} "
                              f"n_messages={len(reply.messages)}" if reply.messages
                   else f"dropped decision_id={reply.decision_id}")
    sent = []
    with replying_to(inbox, update_id):  # marked "sending" just before the first goes out
        for html in reply.messages:
            sent.append(await context.bot.send_message(asker.chat_id, html,
                                                       reply_parameters=quote))
            quote = None
    reply_ms = (time.perf_counter() - start) * 1000
    if reply.decision_id is not None:
        await context.services.db.set_reply_ms(reply.decision_id, reply_ms)
        if sent:  # so "why?" as a reply to one of them finds this decision
            await record_sent(context.services.db, asker.chat_id,
                              [m.message_id for m in sent], reply.decision_id)
    log.info("reply chat_id=%d decision_id=%s n_messages=%d reply_ms=%.1f", asker.chat_id,
             reply.decision_id, len(sent), reply_ms)
    return sent


async def speak(context: BotContext, asker: Asker, reply: Reply) -> None:
    """After the text reply: the voice note of ``reply.speech``, if any, with ``sendVoice``
    (quoting the question), showing "recording a voice message" while it is made. Failures are
    logged and traced (``bot.voice_reply.record_voice``), never raised: the text stands."""
    if reply.speech is None or not reply.messages:
        return
    async with chat_action(context, asker.chat_id, ChatAction.RECORD_VOICE):
        outcome = await make_voice(context.services, reply.speech)
    stages = list(outcome.stages)
    if outcome.audio is not None:
        start = time.perf_counter()
        quote = (ReplyParameters(asker.message_id, allow_sending_without_reply=True)
                 if asker.message_id is not None else None)
        try:
            await context.bot.send_voice(asker.chat_id, outcome.audio.ogg,
                                         duration=math.ceil(outcome.audio.duration_s),
                                         reply_parameters=quote)
            decision, detail = "ok", f"{len(outcome.audio.ogg)} bytes OGG/Opus"
        except TelegramError as exc:
            decision, detail = "failed", f"{type(exc).__name__}: {exc.message}"
        stages.append(Stage("send_voice", decision, detail, (time.perf_counter() - start) * 1e3))
    await record_voice(context.services, asker, reply, stages)
