"""Delivering a reply, once for every channel: text, then the voice note, with the inbox state
committed just before anything goes out.

A front end implements :class:`Outbox`: how its channel sends text (in its own markup) and a
voice note, and shows it is busy. :func:`deliver` does the rest, the same on every channel:

1. the text messages go out through ``outbox.send_text``, which calls ``on_wire`` right before
   the first request leaves (the inbox marks the message ``sending``: after a crash it is never
   sent again);
2. how long sending took is recorded on the decision, and the sent message ids (so "why?" as a
   reply to one of them finds the decision);
3. the voice note, when the reply has one (:func:`speak`): made by ``bot.chat.voice_reply``
   (cached, bounded), delivered by ``outbox.send_voice``, its stages added to the decision's
   trace. A failed voice note never takes back the text.

The returned outcome (``replied decision_id=12 n_messages=1 voice=ok``, ``send_failed
kind=window_closed``, ``no_reply``) is what the inbox stores.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol

from bot.chat.render import Text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply
from bot.chat.voice_cache import VoiceAudio
from bot.chat.voice_reply import make_voice, record_voice
from bot.errors import BotError
from rag.types import Stage
from storage.inbox import record_sent

log = logging.getLogger(__name__)

OnWire = Callable[[], Awaitable[object]]
"""Called right before a channel's first sending request leaves (the inbox's ``sending``)."""


class DeliveryError(BotError):
    """A channel could not deliver (after its own retries): ``kind`` its reason (e.g. WhatsApp's
    ``window_closed``), ``n_sent`` the messages that did go out before."""

    def __init__(self, kind: str, detail: str, *, n_sent: int = 0) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.n_sent = kind, n_sent


class Outbox(Protocol):
    """What a front end implements to deliver replies on its channel."""

    async def send_text(self, asker: Asker, texts: list[Text], on_wire: OnWire) -> list[int]:
        """Send ``texts`` in order, in the channel's markup, split at its length limit, the first
        quoting the question where the channel can; call ``on_wire`` before the first request.
        Returns the sent messages' numeric ids ([] where the channel has none).

        Raises:
            DeliveryError: the channel refused or failed for good.
        """

    async def send_voice(self, asker: Asker, audio: VoiceAudio, on_wire: OnWire) -> str:
        """Send ``audio`` (OGG/Opus) as a voice note; a short detail for the trace.

        Raises:
            DeliveryError: the channel refused or failed for good.
        """

    def busy(self, asker: Asker,
             activity: Literal["typing", "recording"]) -> AbstractAsyncContextManager[object]:
        """Shows ``activity`` in the chat while the block runs (a no-op where there is none)."""


async def _nothing() -> None:
    return None


async def deliver(services: Services, outbox: Outbox, asker: Asker, reply: Reply,
                  on_wire: OnWire = _nothing) -> str:
    """Send ``reply`` (text, then voice) through ``outbox``; the outcome (see the module)."""
    if not reply.messages:
        return f"dropped decision_id={reply.decision_id}"
    start = time.perf_counter()
    try:
        sent = await outbox.send_text(asker, reply.messages, on_wire)
    except DeliveryError as exc:
        log.warning("send_failed channel=%s chat_id=%d decision_id=%s kind=%s n_sent=%d "
                    "detail=%s", asker.channel, asker.chat_id, reply.decision_id, exc.kind,
                    exc.n_sent, exc)
        return f"send_failed kind={exc.kind}"
    reply_ms = (time.perf_counter() - start) * 1000
    if reply.decision_id is not None:
        await services.db.set_reply_ms(reply.decision_id, reply_ms)
        if sent:  # so "why?" as a reply to one of them finds this decision
            await record_sent(services.db, asker.channel, asker.chat_id, sent, reply.decision_id)
    log.info("reply channel=%s chat_id=%d decision_id=%s n_messages=%d reply_ms=%.1f",
             asker.channel, asker.chat_id, reply.decision_id, len(reply.messages), reply_ms)
    outcome = f"replied decision_id={reply.decision_id} n_messages={len(reply.messages)}"
    if reply.speech is not None and services.policy(asker.channel).can_speak:
        outcome += await speak(services, outbox, asker, reply, on_wire)
    return outcome


async def speak(services: Services, outbox: Outbox, asker: Asker, reply: Reply,
                on_wire: OnWire = _nothing) -> str:
    """After the text: the voice note of ``reply.speech`` (made while the chat shows
    "recording"), sent through ``outbox``; its stages go to the decision's trace. Never raises
    for a failure: the suffix of the outcome says `` voice=ok`` or `` voice=failed``."""
    assert reply.speech is not None
    async with outbox.busy(asker, "recording"):
        made = await make_voice(services, reply.speech)
    stages = list(made.stages)
    if made.audio is not None:
        start = time.perf_counter()
        try:
            decision, detail = "ok", await outbox.send_voice(asker, made.audio, on_wire)
        except DeliveryError as exc:
            decision, detail = "failed", str(exc)
        stages.append(Stage("send_voice", decision, detail, (time.perf_counter() - start) * 1e3))
    await record_voice(services, asker, reply, stages, made.failure)
    return " voice=failed" if any(s.decision == "failed" for s in stages) else " voice=ok"
