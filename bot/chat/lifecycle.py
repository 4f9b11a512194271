"""Steps in the life of a claimed message that are the same on every channel, written once.

So far one: :func:`answer_too_late`, for a message sent longer ago than ``BOT_INBOX_MAX_AGE_S``
(``bot.chat.inbox.ChannelInbox.is_stale``: replayed after a crash or a long outage, or
redelivered by Meta days later). Telegram (``bot.telegram.inbox``) and WhatsApp
(``bot.whatsapp.app``) call it instead of answering such a message.
"""

from __future__ import annotations

import logging

from bot.chat.context import load_context
from bot.chat.delivery import OnWire, Outbox, deliver
from bot.chat.services import Services
from bot.chat.types import Asker

log = logging.getLogger(__name__)


async def answer_too_late(services: Services, outbox: Outbox, asker: Asker, age_s: float,
                          on_wire: OnWire) -> str:
    """Instead of a late answer to a message sent ``age_s`` seconds ago: the "reached me too
    late" apology, in the language the chat's other replies use (its ``/lang``, else the
    user's interface language: ``bot.chat.context.load_context``), delivered through
    ``outbox`` like any reply (``on_wire``, the claim's ``sending``, before it leaves). A sender
    the channel's allow-list does not admit gets nothing, as they would get no answer.

    Returns:
        The outcome for the inbox: ``stale_apology age_s=3600``,
        ``stale_apology_failed kind=<DeliveryError kind>`` or ``stale_not_allowed age_s=3600``.

    Raises:
        What ``load_context`` or ``outbox`` raise besides ``DeliveryError`` (a database error:
        the front end defers the message; Telegram's own ``TelegramError``).
    """
    if not services.policy(asker.channel).admits(asker.user_id):
        log.warning("not_allowed channel=%s user_id=%s chat_id=%d reply=dropped stale age_s=%.0f",
                    asker.channel, asker.user_id, asker.chat_id, age_s)
        return f"stale_not_allowed age_s={age_s:.0f}"
    log.warning("inbox_stale channel=%s chat_id=%d message=%s age_s=%.0f reply=apology",
                asker.channel, asker.chat_id, asker.message_key or asker.message_id, age_s)
    reply = (await load_context(services, asker)).say("stale_question")
    outcome = await deliver(services, outbox, asker, reply, on_wire)
    if outcome.startswith("send_failed "):
        return "stale_apology_failed " + outcome.removeprefix("send_failed ")
    return f"stale_apology age_s={age_s:.0f}"
