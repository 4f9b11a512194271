"""The durable inbox on the PTB side: nothing received is lost to a crash, nothing answered twice.

The states and the replay rule are the chat layer's (``bot.chat.inbox``), the same on every
channel; this module only fits them into PTB. Telegram forgets an update once the bot confirms
it (the next ``getUpdates`` offset, or a webhook's HTTP 200), and PTB confirms a batch as soon as
it is queued in memory. So:

- :class:`DurableUpdateQueue` (PTB's ``update_queue``) claims every update in the inbox *before*
  PTB may confirm it: in polling the offset moves on only after ``put`` returns, and the webhook
  answers 200 only after ``put`` returns. An update the inbox already holds (Telegram
  redelivered it, or a replay queued it) is dropped here, with a log line. Its key is
  ``<chat_id>/<message_id>/<version>`` (:func:`update_key`).
- :class:`InboxApplication` holds each update's :class:`~bot.chat.inbox.Claim` while its
  handlers run and marks it done with their outcome, and answers updates older than
  ``BOT_INBOX_MAX_AGE_S`` with a short apology instead of a late answer.
- :func:`replay`, at start-up, queues again what a crash left ``pending``.
- :class:`InboxRateLimiter` calls the reply's ``on_wire`` (the claim's ``sending``) at the last
  moment PTB lets us see, once the rate limiter let the request through and just before it goes
  out, so the window in which a kill loses a reply is one HTTP request; it logs each 429 with
  its ``retry_after_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from telegram import Bot, Update
from telegram.error import RetryAfter, TelegramError
from telegram.ext import AIORateLimiter, Application
from telegram.warnings import PTBDeprecationWarning

from bot.chat.delivery import OnWire
from bot.chat.inbox import ChannelInbox, Claim, Handler
from bot.chat.lifecycle import answer_too_late, defer_logged, settle
from bot.telegram.incoming import asker_of, is_for_bot
from storage.inbox import InboxItem

log = logging.getLogger(__name__)


def update_key(update: Update) -> str:
    """The inbox key of the question ``update`` carries: ``<chat id>/<message id>/<version>``,
    version 0 for a new message, its edit date in Unix seconds for an edited one (an edit is a
    new question); ``update/<update id>`` for an update without a message."""
    message = update.effective_message
    if message is None:
        return f"update/{update.update_id}"
    version = int(message.edit_date.timestamp()) if update.edited_message and \
        message.edit_date else 0
    return f"{message.chat_id}/{message.message_id}/{version}"


async def accept(inbox: ChannelInbox, update: Update) -> Claim | None:
    """Claim ``update`` as pending; None when it is a duplicate."""
    message = update.effective_message
    payload = json.dumps(update.to_dict(), ensure_ascii=False)
    return await inbox.claim(update_key(update), message.chat_id if message else None, payload)


async def replay(inbox: ChannelInbox, bot: Bot, queue: asyncio.Queue,
                 handle: Handler | None = None) -> int:
    """Open the inbox (``ChannelInbox.open``): replicas start the dispatcher, which answers
    stored updates with ``handle``; one process queues again every update a crash left pending
    (oldest first; the chat layer closed those left ``sending``). Returns the number queued."""
    items = await inbox.open(handle) if handle is not None else await inbox.replay()
    for item in items:
        update = Update.de_json(json.loads(item.payload), bot)
        await asyncio.Queue.put(queue, update)  # already stored: skip the duplicate check
    return len(items)


_ON_WIRE: ContextVar[OnWire | None] = ContextVar("on_wire", default=None)
"""What to call before the first sending request of the reply being sent in this task."""
SENDING_ENDPOINTS = frozenset({"sendMessage", "sendVoice", "sendAudio", "sendDocument"})


@contextlib.contextmanager
def replying_to(on_wire: OnWire | None) -> Iterator[None]:
    """Within the block, every request of :data:`SENDING_ENDPOINTS` first awaits ``on_wire``
    (``InboxRateLimiter``), right before it goes out."""
    token = _ON_WIRE.set(on_wire)
    try:
        yield
    finally:
        _ON_WIRE.reset(token)


class InboxRateLimiter(AIORateLimiter):
    """PTB's ``AIORateLimiter`` that, for a reply sent inside :func:`replying_to`, awaits its
    ``on_wire`` once the limiter let the request through, right before it is made (again before
    each retry after a 429; the inbox makes that a no-op once marked), and logs every 429 with
    the seconds Telegram asked to wait (PTB's own line is at INFO on a quieted logger)."""

    async def process_request(self, callback, args: Any, kwargs: dict[str, Any], endpoint: str,
                              data: dict[str, Any], rate_limit_args: int | None):
        on_wire = _ON_WIRE.get() if endpoint in SENDING_ENDPOINTS else None
        max_retries = rate_limit_args or self._max_retries  # as AIORateLimiter reads them
        request = callback

        async def callback(*a: Any, **kw: Any):  # noqa: ANN202 (PTB's callback type)
            if on_wire is not None:
                await on_wire()
            try:
                return await request(*a, **kw)
            except RetryAfter as exc:
                log.warning("telegram.retry_after endpoint=%s chat_id=%s retry_after_s=%g "
                            "max_retries=%d: Telegram said 429 Too Many Requests; PTB waits "
                            "that long, then retries up to max_retries (TELEGRAM_MAX_RETRIES)",
                            endpoint, data.get("chat_id"), retry_after_s(exc), max_retries)
                raise

        return await super().process_request(callback, args, kwargs, endpoint, data,
                                              rate_limit_args)


def retry_after_s(exc: RetryAfter) -> float:
    """The seconds a 429 asked to wait (the Bot API's ``parameters.retry_after``): PTB 22's
    ``RetryAfter.retry_after`` is an int (with a deprecation warning), PTB 23's a timedelta."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class DurableUpdateQueue(asyncio.Queue):
    """PTB's update queue, claiming each update in :attr:`inbox` before queueing it.

    ``inbox`` is attached in ``post_init`` once the database is open (before polling or the
    webhook starts); anything that is not an ``Update`` (PTB's stop signal) passes through.
    """

    def __init__(self) -> None:
        super().__init__()
        self.inbox: ChannelInbox | None = None

    async def put(self, item: object) -> None:
        if isinstance(item, Update) and self.inbox is not None:
            claim = await accept(self.inbox, item)
            message = item.effective_message
            if claim is None or self.inbox.submit(claim, message.chat_id if message else None):
                return  # a duplicate; or (replicas) the dispatcher answers it in its chat's turn
        await super().put(item)


class InboxApplication(Application):
    """PTB's Application that holds each update's claim while its handlers run and closes it
    with their outcome (answered, refused, ignored or failed: the error handler has run by
    then), and answers a stale update with an apology instead of running the handlers. The
claims of the updates being handled are in ``bot_data["claims"]`` by ``update_id`` (read by
``BotContext.claim``)."""

    async def process_update(self, update: object) -> None:
        inbox: ChannelInbox | None = self.bot_data.get("inbox")
        if inbox is None or not isinstance(update, Update):
            await super().process_update(update)
            return
        message = update.effective_message
        if message is None:
            await self.process_claimed(update, inbox.held(update_key(update)))
            return
        async with inbox.in_turn(message.chat_id):  # a chat's updates one at a time, in order
            await self.process_claimed(update, inbox.held(update_key(update)))

    async def process_claimed(self, update: Update, claim: Claim) -> None:
        """Run the handlers of ``update`` (or apologise for a stale one) under ``claim``, then
        close it with their outcome. Raises the error a handler deferred the answer for
        (``Claim.defer``: replicas, the database was unreachable), leaving it unfinished."""
        inbox: ChannelInbox = self.bot_data["inbox"]
        claims: dict[int, Claim] = self.bot_data.setdefault("claims", {})
        claims[update.update_id] = claim
        try:
            age_s = message_age_s(update)
            if inbox.is_stale(age_s):
                await self._apologise(update, claim, age_s)
            else:
                await super().process_update(update)
        finally:
            claims.pop(update.update_id, None)
        await settle(claim)

    async def handle_stored(self, item: InboxItem, claim: Claim) -> None:
        """The dispatcher's handler (replicas): the stored update, answered under ``claim``."""
        await self.process_claimed(Update.de_json(json.loads(item.payload), self.bot), claim)

    async def _apologise(self, update: Update, claim: Claim, age_s: float) -> None:
        """Tell the asker their question came too late to answer (in private chats, or when it
        was addressed to the bot): the chat layer's :func:`~bot.chat.lifecycle.answer_too_late`
        (allow-list, the chat's language, the outbox), and note it."""
        message = update.effective_message
        if not is_for_bot(message, self.bot.username, self.bot.id):
            claim.outcome = f"stale_ignored age_s={age_s:.0f}"
            return
        try:
            claim.outcome = await answer_too_late(
                self.bot_data["services"], self.bot_data["outbox"],
                asker_of(message, self.bot.id), age_s, claim.sending)
        except TelegramError as exc:
            claim.outcome = f"stale_apology_failed detail={exc.message}"
        except Exception as exc:
            if not defer_logged(claim, exc, "telegram", f"chat_id={message.chat_id} "
                                f"key={claim.key}"):
                raise


def message_age_s(update: Update, now_s: float | None = None) -> float | None:
    """Seconds since the update's message was sent (edited, for an edit), by Telegram's
    timestamp; None when it carries no message."""
    message = update.effective_message
    if message is None or message.date is None:
        return None
    sent = message.edit_date if update.edited_message and message.edit_date else message.date
    return (time.time() if now_s is None else now_s) - sent.timestamp()
