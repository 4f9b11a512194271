"""The life of a claimed message, the same on every channel, written once.

A message the front end claimed in its ``bot.chat.inbox.ChannelInbox`` is, in this order:

1. answered in its chat's turn: one process spawns a task that holds the chat's turn
   (``ChannelInbox.in_turn``); replicas get the turn from the dispatcher (``bot.chat.dispatch``),
   which calls the front end's ``handle_stored``. At start-up one process replays what a crash
   left ``pending``;
2. checked for age: one sent longer ago than ``BOT_INBOX_MAX_AGE_S`` (``ChannelInbox.is_stale``:
   replayed after a crash or a long outage, redelivered by Meta days later) gets the "reached me
   too late" apology (:func:`answer_too_late`) instead of an answer;
3. answered by the chat layer and delivered through the channel's ``Outbox``
   (``bot.chat.delivery.deliver``, which marks the claim ``sending`` right before it leaves);
4. on an error: replicas *defer* a database error or a lost lease (:func:`defer_logged`: nothing
   sent, nothing stored; the dispatcher takes the message again); anything else is logged
   (``<channel>_error``) and answered with the chat's "something went wrong" reply, outcome
   ``error``;
5. finished: its outcome and decision id committed (``Claim.finish``), one line
   ``<channel>_reply channel=<channel> chat_id=… <ref> type=… decision_id=… outcome=… ms=…``.

:class:`MessageLifecycle` does all of that for a front end whose messages are JSON payloads it
answers itself (WhatsApp, the web page): the front end subclasses it and fills in the hooks
(:meth:`~MessageLifecycle.asker_of`, :meth:`~MessageLifecycle.age_s`,
:meth:`~MessageLifecycle.reply_to`; optionally :meth:`~MessageLifecycle.begin`,
:meth:`~MessageLifecycle.after_reply`, :meth:`~MessageLifecycle.after_error_reply`,
:meth:`~MessageLifecycle.finished`). Telegram runs its handlers through PTB
(``bot.telegram.inbox``) and shares the decisions: :func:`answer_too_late`,
:func:`deliver_answer`, :func:`defer_logged`, :func:`answer_error` and :func:`settle`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from dataclasses import dataclass
from typing import Any

from bot.chat.context import load_context
from bot.chat.delivery import OnWire, Outbox, deliver
from bot.chat.dispatch import CLOSE_WAIT_S
from bot.chat.inbox import ChannelInbox, Claim
from bot.chat.services import Services
from bot.chat.tasks import raise_if_cancelled, stop_tasks
from bot.chat.types import Asker, Reply
from storage.inbox import InboxItem

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


def defer_logged(claim: Claim, exc: BaseException, channel: str, ref: str) -> bool:
    """Whether the answer to ``claim``'s message is deferred for ``exc`` (``Claim.defer``:
    replicas, a database error or a lost lease); if so one line ``answer_deferred
    channel=<channel> <ref> kind=<exception class> detail=…: answered again later``, where
    ``ref`` names the message (``chat_id=… message_id=…``)."""
    if not claim.defer(exc):
        return False
    log.warning("answer_deferred channel=%s %s kind=%s detail=%s: answered again later", channel,
                ref, type(exc).__name__, str(exc).strip()[:200])
    return True


async def deliver_answer(services: Services, outbox: Outbox, asker: Asker, reply: Reply,
                         claim: Claim | None) -> str:
    """Deliver the answer ``reply`` (``bot.chat.delivery.deliver``, the claim's ``sending``
    before it leaves) and note its decision id and outcome on ``claim`` (None: a channel run
    without the durable inbox). Returns the outcome (``replied …``, ``send_failed …``).

    Raises:
        What ``deliver`` raises besides ``DeliveryError`` (a database error, ``LeaseLostError``).
    """
    if claim is None:
        return await deliver(services, outbox, asker, reply)
    claim.decision_id = reply.decision_id
    claim.outcome = await deliver(services, outbox, asker, reply, claim.sending)
    return claim.outcome


async def answer_error(services: Services, outbox: Outbox, asker: Asker,
                       claim: Claim | None) -> str:
    """After a failure while answering (logged by the caller): mark ``claim``'s outcome
    ``error`` (None: a channel run without the durable inbox), then send the chat's "something
    went wrong" reply in the language its other replies use (its ``/lang``, else the user's
    interface language: ``bot.chat.context.load_context``), through ``outbox`` like any reply
    (split at the channel's limit; the claim's ``sending`` before it leaves). The outcome stays
    ``error`` whether or not the reply got out. Returns the delivery's outcome (``replied …``,
    ``send_failed …``).

    Raises:
        What ``load_context`` or ``outbox`` raise besides ``DeliveryError`` (a database error;
        Telegram's own ``TelegramError``): the caller logs it, the outcome stays ``error``.
    """
    if claim is not None:
        claim.outcome = "error"
    reply = (await load_context(services, asker)).say("error")
    if claim is None:
        return await deliver(services, outbox, asker, reply)
    return await deliver(services, outbox, asker, reply, claim.sending)


async def settle(claim: Claim) -> None:
    """Close ``claim`` once its message was handled: commit its outcome (``Claim.finish``), or
    when the answer was deferred (``Claim.deferred``) raise that error instead, leaving the
    message unfinished for the dispatcher (replicas) to take again.

    Raises:
        ``claim.deferred``: a database error or ``LeaseLostError``.
    """
    if claim.deferred is not None:
        raise claim.deferred
    await claim.finish()


@dataclass(slots=True)
class Answering:
    """One claimed message while its lifecycle runs: its stored ``payload`` (parsed JSON), its
    ``claim``, who asked (``asker``) and the front end's own record of it (``note``: the web
    page's ``Exchange``; None on WhatsApp)."""

    payload: dict[str, Any]
    claim: Claim
    asker: Asker
    note: Any = None


class MessageLifecycle:
    """A front end's claimed messages, from the inbox to their outcome (see the module).

    A subclass passes its ``services``, its channel's ``inbox`` and ``outbox`` to ``__init__``
    and fills in the hooks; its own code awaits :meth:`replay` at start, calls :meth:`spawn` for
    a message it just claimed when ``inbox.submit`` did not take it (one process), and awaits
    :meth:`aclose` at the end. Log lines and task names begin with the inbox's channel name.
    """

    ref_name = "message_id"
    """How :meth:`ref` names the message's id in log lines (``message_id=…``, ``key=…``)."""

    def __init__(self, services: Services, inbox: ChannelInbox, outbox: Outbox) -> None:
        self.services, self.inbox, self.outbox = services, inbox, outbox
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def channel(self) -> str:
        return self.inbox.channel

    # ------------------------------------------------------------------ hooks
    def asker_of(self, payload: dict[str, Any], claim: Claim) -> Asker:
        """Who sent the stored message ``payload`` (its chat, sender and key)."""
        raise NotImplementedError

    def age_s(self, payload: dict[str, Any]) -> float | None:
        """Seconds since the user sent ``payload``, by its own timestamp; None if unknown."""
        raise NotImplementedError

    async def reply_to(self, asker: Asker, payload: dict[str, Any]) -> Reply:
        """The reply to one message, from the chat layer."""
        raise NotImplementedError

    def begin(self, payload: dict[str, Any], claim: Claim) -> Answering:
        """The message about to be answered; a front end that keeps its own record of it
        (``note``) overrides this."""
        return Answering(payload, claim, self.asker_of(payload, claim))

    async def after_reply(self, message: Answering, reply: Reply) -> None:
        """Once ``reply`` (the answer, not an apology) was delivered; nothing by default."""

    def after_error_reply(self, message: Answering) -> None:
        """Once the "something went wrong" reply was delivered; nothing by default."""

    def finished(self, message: Answering) -> None:
        """Once the message is closed (or closing failed); nothing by default. Not called for
        a deferred answer (the message is answered again)."""

    def ref(self, message: Answering) -> str:
        """The message in log lines: ``chat_id=<chat id> <ref_name>=<key>``."""
        return f"chat_id={message.asker.chat_id} {self.ref_name}={message.claim.key}"

    # ------------------------------------------------------------------ the lifecycle
    def spawn(self, payload: dict[str, Any], claim: Claim) -> asyncio.Task[None]:
        """Answer ``payload`` in a task of its own (``<channel>_answer:<key>``), in its chat's
        turn (one process). Returns the task (kept until it ends, for :meth:`drain`)."""
        message = self.begin(payload, claim)

        async def in_turn() -> None:
            async with self.inbox.in_turn(message.asker.chat_id):
                await self.run(message)

        task = asyncio.create_task(in_turn(), name=f"{self.channel}_answer:{claim.key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def replay(self) -> int:
        """Open the inbox: replicas start the dispatcher (``bot.chat.dispatch``), which hands
        stored messages to :meth:`handle_stored` in each chat's order; one process handles the
        messages a previous run claimed but did not finish (the chat layer closes those whose
        reply was already on the wire). Returns how many are handled now."""
        pending = await self.inbox.open(self.handle_stored)
        for item in pending:
            self.spawn(json.loads(item.payload), self.inbox.held(item.message_key))
        return len(pending)

    async def handle_stored(self, item: InboxItem, claim: Claim) -> None:
        """The dispatcher's handler (replicas): the stored message, answered under ``claim``.

        Raises:
            the database error or ``LeaseLostError`` the answer was deferred for
            (``Claim.defer``), leaving the message unfinished for the dispatcher.
        """
        await self.handle(json.loads(item.payload), claim)
        if claim.deferred is not None:
            raise claim.deferred

    async def handle(self, payload: dict[str, Any], claim: Claim) -> None:
        """Answer one claimed message and store its outcome (see :meth:`run`)."""
        await self.run(self.begin(payload, claim))

    async def run(self, message: Answering) -> None:
        """Answer ``message`` (the apology if it is stale), store its outcome and log it; never
        raises but for closing the claim (replicas: an error the answer is deferred for is kept
        in ``claim.deferred``, nothing sent or stored)."""
        payload, claim, asker = message.payload, message.claim, message.asker
        start = time.perf_counter()
        try:
            if self.inbox.is_stale(age_s := self.age_s(payload)):
                claim.outcome = await answer_too_late(self.services, self.outbox, asker, age_s,
                                                      claim.sending)
            else:
                reply = await self.reply_to(asker, payload)
                await deliver_answer(self.services, self.outbox, asker, reply, claim)
                await self.after_reply(message, reply)
        except Exception as exc:  # a bug must not kill the server or lose the outcome
            # cancelled (aclose after CLOSE_WAIT_S) while the driver turned it into its own
            # error: end as cancelled, the message unfinished, no error reply
            raise_if_cancelled()
            if defer_logged(claim, exc, self.channel, self.ref(message)):
                return
            log.exception("%s_error %s", self.channel, self.ref(message))
            try:
                await answer_error(self.services, self.outbox, asker, claim)
                self.after_error_reply(message)
            except Exception:
                raise_if_cancelled()
                log.exception("%s_error_reply_failed chat_id=%s", self.channel, asker.chat_id)
        try:
            await claim.finish()
        finally:
            self.finished(message)
        log.info("%s_reply channel=%s %s type=%s decision_id=%s outcome=%s ms=%.0f",
                 self.channel, self.channel, self.ref(message), payload.get("type"),
                 claim.decision_id, claim.outcome, (time.perf_counter() - start) * 1e3)

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Wait at most ``timeout_s`` seconds for the messages being handled (at shutdown, and
        in tests)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def aclose(self) -> None:
        """Stop the inbox, let answers under way finish for up to ``CLOSE_WAIT_S`` seconds
        (as the dispatcher does), then cancel what is left (its message stays unfinished in the
        inbox and is handled at the next start). Bounded."""
        await self.inbox.aclose()
        await self.drain(CLOSE_WAIT_S)
        await stop_tasks(set(self._tasks), f"{self.channel}_answer")


async def until_signalled() -> None:
    """Return once the process gets SIGINT or SIGTERM (a server front end then closes: its
    ``aclose`` is bounded)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
