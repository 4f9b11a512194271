"""The durable inbox on the PTB side: nothing received is lost to a crash, nothing answered twice.

Telegram forgets an update once the bot confirms it (the next ``getUpdates`` offset, or a
webhook's HTTP 200), and PTB confirms a batch as soon as it is queued in memory. So:

- :class:`DurableUpdateQueue` (PTB's ``update_queue``) commits every update to the ``inbox``
  table *before* PTB may confirm it: in polling the offset moves on only after ``put`` returns,
  and the webhook answers 200 only after ``put`` returns. An update the inbox already holds
  (Telegram redelivered it, or a replay queued it) is dropped here, with a log line.
- :class:`InboxApplication` marks each update done with its outcome once its handlers ran, and
  answers updates older than ``BOT_INBOX_MAX_AGE_S`` with a short apology instead of a late
  answer.
- :meth:`UpdateInbox.replay`, at start-up, queues again what a crash left ``pending``. An update
  left ``sending`` (killed while its reply was on the wire) is not sent again: Telegram has no
  way to ask whether it arrived, and it almost always did; the log line says so. The update is
  marked ``sending`` by :class:`InboxRateLimiter` at the last moment PTB lets us see, once the
  rate limiter let the request through and just before it goes out, so the window in which a
  kill loses a reply is one loopback/HTTP request, not the rate limiter's queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from html import escape
from typing import Any

from telegram import Bot, ReplyParameters, Update
from telegram.error import TelegramError
from telegram.ext import AIORateLimiter, Application

from bot.incoming import asker_of, is_for_bot
from bot.messages import t
from storage.inbox import Inbox

log = logging.getLogger(__name__)


@dataclass(slots=True)
class UpdateInbox:
    """The bot's inbox: the stored table, the age after which a question gets an apology
    (``max_age_s``, seconds, from ``BOT_INBOX_MAX_AGE_S``), and the outcome each handler noted
    for an update still being handled (``update_id`` → short key=value text)."""

    store: Inbox
    max_age_s: float
    outcomes: dict[int, str] = field(default_factory=dict)

    async def accept(self, update: Update) -> bool:
        """Commit ``update`` as pending; False (and a log line) when it is a duplicate."""
        chat_id, message_id, version = update_key(update)
        payload = json.dumps(update.to_dict(), ensure_ascii=False)
        is_new = await self.store.add(update.update_id, chat_id, message_id, version, payload)
        log.info("inbox_%s update_id=%d chat_id=%s message_id=%s version=%d",
                 "stored" if is_new else "duplicate_dropped", update.update_id, chat_id,
                 message_id, version)
        return is_new

    def note(self, update_id: int, outcome: str) -> None:
        """What handling ``update_id`` led to (e.g. ``replied decision_id=12 n_messages=1``)."""
        self.outcomes[update_id] = outcome

    async def sending(self, update_id: int) -> None:
        """Commit that a reply to ``update_id`` is about to go out."""
        await self.store.mark_sending(update_id)

    async def finish(self, update_id: int, default: str = "no_reply") -> None:
        """Mark ``update_id`` done with the outcome noted for it (else ``default``); log it."""
        outcome = self.outcomes.pop(update_id, default)
        if await self.store.finish(update_id, outcome):
            log.info("inbox_done update_id=%d outcome=%s", update_id, outcome)

    async def replay(self, bot: Bot, queue: asyncio.Queue) -> int:
        """Queue again every update a crash left pending (oldest first); close those left
        ``sending`` without sending again. Returns the number queued."""
        n_queued = 0
        for item in await self.store.unfinished():
            if item.status == "sending":
                await self.finish(item.update_id, "reply_in_flight_at_crash not_resent")
                log.warning("inbox_replay_skipped update_id=%d chat_id=%s message_id=%s "
                            "reason=reply_in_flight_at_crash", item.update_id, item.chat_id,
                            item.message_id)
                continue
            update = Update.de_json(json.loads(item.payload), bot)
            await asyncio.Queue.put(queue, update)  # already stored: skip the duplicate check
            n_queued += 1
            log.info("inbox_replay update_id=%d chat_id=%s message_id=%s received_at=%s",
                     item.update_id, item.chat_id, item.message_id,
                     item.received_at.isoformat(timespec="seconds"))
        return n_queued


def update_key(update: Update) -> tuple[int | None, int | None, int]:
    """(chat id, message id, version) of the question ``update`` carries: version 0 for a new
    message, its edit date in Unix seconds for an edited one (an edit is a new question)."""
    message = update.effective_message
    if message is None:
        return None, None, 0
    version = int(message.edit_date.timestamp()) if update.edited_message and \
        message.edit_date else 0
    return message.chat_id, message.message_id, version


_REPLYING_TO: ContextVar[tuple[UpdateInbox, int] | None] = ContextVar("replying_to",
                                                                      default=None)
"""The inbox and update a reply being sent in this task belongs to (see :func:`replying_to`)."""
SENDING_ENDPOINTS = frozenset({"sendMessage", "sendVoice", "sendAudio", "sendDocument"})


@contextlib.contextmanager
def replying_to(inbox: UpdateInbox | None, update_id: int | None) -> Iterator[None]:
    """Within the block, the first request of :data:`SENDING_ENDPOINTS` marks ``update_id``
    ``sending`` just before it goes out (``InboxRateLimiter``); a no-op without an inbox."""
    token = _REPLYING_TO.set((inbox, update_id) if inbox and update_id is not None else None)
    try:
        yield
    finally:
        _REPLYING_TO.reset(token)


class InboxRateLimiter(AIORateLimiter):
    """PTB's ``AIORateLimiter`` that, for a reply sent inside :func:`replying_to`, commits the
    update as ``sending`` once the limiter let the request through, right before it is made
    (again before each retry after a 429; a no-op once marked)."""

    async def process_request(self, callback, args: Any, kwargs: dict[str, Any], endpoint: str,
                              data: dict[str, Any], rate_limit_args: int | None):
        replying = _REPLYING_TO.get()
        if replying is not None and endpoint in SENDING_ENDPOINTS:
            inbox, update_id = replying
            request = callback

            async def callback(*a: Any, **kw: Any):  # noqa: ANN202 (PTB's callback type)
                await inbox.sending(update_id)
                return await request(*a, **kw)

        return await super().process_request(callback, args, kwargs, endpoint, data,
                                              rate_limit_args)


class DurableUpdateQueue(asyncio.Queue):
    """PTB's update queue, committing each update to :attr:`inbox` before queueing it.

    ``inbox`` is attached in ``post_init`` once the database is open (before polling or the
    webhook starts); anything that is not an ``Update`` (PTB's stop signal) passes through.
    """

    def __init__(self) -> None:
        super().__init__()
        self.inbox: UpdateInbox | None = None

    async def put(self, item: object) -> None:
        if isinstance(item, Update) and self.inbox is not None \
                and not await self.inbox.accept(item):
            return
        await super().put(item)


class InboxApplication(Application):
    """PTB's Application that closes each update in the inbox once its handlers ran (answered,
    refused, ignored or failed: the error handler has run by then), and answers a stale update
    with an apology instead of running the handlers."""

    async def process_update(self, update: object) -> None:
        inbox: UpdateInbox | None = self.bot_data.get("inbox")
        if inbox is None or not isinstance(update, Update):
            await super().process_update(update)
            return
        age_s = message_age_s(update)
        if age_s is not None and age_s > inbox.max_age_s:
            await self._apologise(update, inbox, age_s)
        else:
            await super().process_update(update)
        await inbox.finish(update.update_id)

    async def _apologise(self, update: Update, inbox: UpdateInbox, age_s: float) -> None:
        """Tell the asker their question came too late to answer (in private chats, or when it
        was addressed to the bot), and note it."""
        message = update.effective_message
        if not is_for_bot(message, self.bot.username, self.bot.id):
            inbox.note(update.update_id, f"stale_ignored age_s={age_s:.0f}")
            return
        lang = asker_of(message).interface_lang or "en"
        log.warning("inbox_stale update_id=%d chat_id=%d age_s=%.0f max_age_s=%.0f reply=apology",
                    update.update_id, message.chat_id, age_s, inbox.max_age_s)
        try:
            with replying_to(inbox, update.update_id):
                await self.bot.send_message(
                    message.chat_id, escape(t("stale_question", lang)),
                    reply_parameters=ReplyParameters(message.message_id,
                                                     allow_sending_without_reply=True))
            inbox.note(update.update_id, f"stale_apology age_s={age_s:.0f}")
        except TelegramError as exc:
            inbox.note(update.update_id, f"stale_apology_failed detail={exc.message}")


def message_age_s(update: Update, now_s: float | None = None) -> float | None:
    """Seconds since the update's message was sent (edited, for an edit), by Telegram's
    timestamp; None when it carries no message."""
    message = update.effective_message
    if message is None or message.date is None:
        return None
    sent = message.edit_date if update.edited_message and message.edit_date else message.date
    return (time.time() if now_s is None else now_s) - sent.timestamp()
