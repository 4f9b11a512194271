"""How replies leave on Telegram (:class:`TelegramOutbox`, the chat layer's
:class:`~bot.chat.delivery.Outbox`): HTML messages quoting the question, ``sendVoice``, and
"typing…" / "recording a voice message" while the bot works."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Literal

from telegram import Bot, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import Forbidden, TelegramError

from bot.chat.delivery import DeliveryError, OnWire
from bot.chat.render import Text
from bot.chat.tasks import raise_if_cancelled, stop_tasks
from bot.chat.types import Asker
from bot.chat.voice_cache import VoiceAudio
from bot.telegram.inbox import replying_to
from bot.telegram.markup import to_html

log = logging.getLogger(__name__)

ACTIONS = {"typing": ChatAction.TYPING, "recording": ChatAction.RECORD_VOICE}


class TelegramOutbox:
    """Sends through ``bot``; chat actions are re-sent every ``chat_action_interval_s`` seconds
    (an action shows for about 5 s)."""

    def __init__(self, bot: Bot, chat_action_interval_s: float) -> None:
        self.bot, self.chat_action_interval_s = bot, chat_action_interval_s

    async def send_text(self, asker: Asker, texts: list[Text], on_wire: OnWire) -> list[int]:
        """Each text as HTML messages (``bot.telegram.markup``), the first quoting the question.
        A ``TelegramError`` propagates to the error handler (``bot.telegram.handlers.on_error``),
        which logs it by kind."""
        quote = _quote(asker)
        sent = []
        with replying_to(on_wire):  # marked "sending" just before the first goes out
            for text in texts:
                for html in to_html(text):
                    message = await self.bot.send_message(asker.chat_id, html,
                                                          reply_parameters=quote)
                    sent.append(message.message_id)
                    quote = None
        return sent

    async def send_voice(self, asker: Asker, audio: VoiceAudio, on_wire: OnWire) -> str:
        try:
            with replying_to(on_wire):
                await self.bot.send_voice(asker.chat_id, audio.ogg,
                                          duration=math.ceil(audio.duration_s),
                                          reply_parameters=_quote(asker))
        except TelegramError as exc:
            raise DeliveryError(type(exc).__name__, exc.message) from exc
        return f"{len(audio.ogg)} bytes OGG/Opus"

    @contextlib.asynccontextmanager
    async def busy(self, asker: Asker,
                   activity: Literal["typing", "recording"]) -> AsyncIterator[None]:
        """Show ``activity`` in the chat while the block runs. Failures to send it are logged and
        never stop the block."""
        action = ACTIONS[activity]

        async def keep_showing() -> None:
            while True:
                try:
                    await self.bot.send_chat_action(asker.chat_id, action)
                except Forbidden:
                    return
                except TelegramError as exc:
                    raise_if_cancelled()
                    log.debug("chat_action_failed chat_id=%s detail=%s", asker.chat_id, exc)
                await asyncio.sleep(self.chat_action_interval_s)

        task = asyncio.create_task(keep_showing(), name=f"chat_action:{asker.chat_id}")
        try:
            yield
        finally:
            await stop_tasks([task], "chat_action")


def _quote(asker: Asker) -> ReplyParameters | None:
    return (ReplyParameters(asker.message_id, allow_sending_without_reply=True)
            if asker.message_id is not None else None)
