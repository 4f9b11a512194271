"""The durable inbox as every channel uses it: claim a message before acknowledging it, mark it
``sending`` right before its reply leaves, ``done`` with its outcome.

The front end only names its messages (``(channel, message_key)``, the key being the channel's
own id as text) and keeps their JSON; the states, the replay rule and who answers what are
decided here, once. The table is ``storage.inbox``. Two ways, picked by :func:`channel_inbox`:

- one process (SQLite, the default): the front end handles what it claimed at once; at start-up
  it replays what a crash left ``pending`` and closes, without sending again, what it left
  ``sending`` (:meth:`ChannelInbox.replay`);
- replicas (PostgreSQL): a front end that claimed a message hands it to
  :meth:`ChannelInbox.submit` and returns (the webhook's 200 follows the commit); the chat's
  messages are then taken one at a time, oldest first, by whichever replica gets there
  (``bot.chat.dispatch``): that keeps each chat in order across replicas, renews the lease while
  answering, and sweeps for the messages of replicas that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from bot.chat.dispatch import ChatDispatcher, LeaseLostError, Replicas
from storage.backend import driver_errors
from storage.inbox import Inbox, InboxItem

log = logging.getLogger(__name__)

Handler = Callable[[InboxItem, "Claim"], Awaitable[None]]
"""A front end's handling of one stored message (its payload) under its claim; it stores the
outcome with ``claim.finish()``."""


@dataclass(slots=True)
class Claim:
    """One claimed message while it is handled: ``outcome`` and ``decision_id`` are stored by
    :meth:`finish`."""

    inbox: ChannelInbox
    key: str
    outcome: str = "no_reply"
    decision_id: int | None = None
    holder: str | None = None
    is_on_wire: bool = False
    deferred: BaseException | None = None
    left_open_because: str | None = None

    def defer(self, exc: BaseException) -> bool:
        """Replicas: whether ``exc`` (a database error: PostgreSQL restarting; a lost lease)
        means the message is to be answered later rather than closed; if so it is kept in
        :attr:`deferred` and the front end neither replies nor finishes: the dispatcher takes
        the message again (or leaves it to the replica that took it over)."""
        if self.holder is None or not isinstance(exc, (LeaseLostError, *driver_errors())):
            return False
        self.deferred = exc
        return True

    async def sending(self) -> None:
        """Commit that a reply to this message is about to leave (a no-op once marked).

        Raises:
            LeaseLostError: (replicas: ``holder`` set) another replica took the message over.
        """
        if self.is_on_wire:
            return
        store, channel = self.inbox.store, self.inbox.channel
        if not await store.mark_sending(channel, self.key, holder=self.holder) \
                and self.holder is not None:
            item = await store.get(channel, self.key)
            if item is None or item.status != "sending" or item.claimed_by != self.holder:
                log.warning("inbox_lease_lost channel=%s key=%s holder=%s now_held_by=%s",
                            channel, self.key, self.holder, item and item.claimed_by)
                raise LeaseLostError(f"{channel} message {self.key} was taken over by "
                                     f"{item and item.claimed_by}: not sending from here")
        self.is_on_wire = True

    def leave_open(self, reason: str) -> None:
        """Never close this message (:meth:`finish` does nothing): its reply failed because the
        process is stopping, so it was not answered. It stays unfinished in the inbox: taken
        again by another replica or at the next start (``pending``), or closed there as
        ``reply_in_flight_at_crash`` if it was already ``sending`` (at most once)."""
        self.left_open_because = reason

    async def finish(self) -> None:
        """Commit the message ``done`` with its outcome; log it (once). Not when left open."""
        if self.left_open_because is not None:
            log.warning("inbox_left_open channel=%s key=%s reason=%s", self.inbox.channel,
                        self.key, self.left_open_because)
            return
        if await self.inbox.store.finish(self.inbox.channel, self.key, self.outcome,
                                         self.decision_id, holder=self.holder):
            log.info("inbox_done channel=%s key=%s outcome=%s", self.inbox.channel, self.key,
                     self.outcome)


@dataclass(slots=True)
class ChannelInbox:
    """One channel's view of the durable inbox; ``max_age_s`` (``BOT_INBOX_MAX_AGE_S``) is the
    age after which a question gets an apology instead of a late answer."""

    store: Inbox
    channel: str
    max_age_s: float
    replicas: Replicas | None = None
    dispatcher: ChatDispatcher | None = None
    _turns: dict[int | None, tuple[asyncio.Lock, list[int]]] = field(default_factory=dict)

    @property
    def is_shared(self) -> bool:
        """Whether replicas share this inbox (PostgreSQL): see :meth:`submit`."""
        return self.replicas is not None

    async def open(self, handle: Handler) -> list[InboxItem]:
        """Start handling. Replicas: start this replica's dispatcher (it calls ``handle`` for
        each message it takes, in each chat's order, and sweeps at once for what nobody holds);
        returns []. One process: the messages a crash left to handle again
        (:meth:`replay`), which the front end handles itself."""
        if self.replicas is None:
            return await self.replay()
        holder = self.replicas.holder
        self.dispatcher = ChatDispatcher(
            self.store, self.channel,
            lambda item: handle(item, Claim(self, item.message_key, holder=holder)),
            self.replicas)
        await self.dispatcher.start()
        return []

    @contextlib.asynccontextmanager
    async def in_turn(self, chat_id: int | None) -> AsyncIterator[None]:
        """One process: hold ``chat_id``'s turn while one of its messages is answered, so a
        chat's messages are answered one at a time, in the order their handling began
        (``asyncio.Lock`` wakes its waiters first come, first served). So at most one of a
        chat's messages is ``sending`` when the process dies, and the rest stay ``pending`` and
        are replayed (issue 23: a WhatsApp burst SIGKILLed after its first reply). Replicas
        get the same from the dispatcher."""
        lock, users = self._turns.setdefault(chat_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._turns[chat_id]

    def submit(self, claim: Claim, chat_id: int | None) -> bool:
        """Replicas: hand a message just claimed to the dispatcher, which answers it in its
        chat's turn (on this replica or another); True. One process: False, the front end
        handles it now."""
        if self.dispatcher is None:
            return False
        self.dispatcher.notify(chat_id)
        return True

    async def aclose(self) -> None:
        """Stop the dispatcher (replicas): sweeps end, answers under way get a few seconds."""
        if self.dispatcher is not None:
            await self.dispatcher.aclose()

    async def claim(self, key: str, chat_id: int | None, payload: str) -> Claim | None:
        """Commit a new message as ``pending``; None (and a log line) for a duplicate."""
        is_new = await self.store.claim(self.channel, key, chat_id, payload)
        log.info("inbox_%s channel=%s key=%s chat_id=%s",
                 "stored" if is_new else "duplicate_dropped", self.channel, key, chat_id)
        return Claim(self, key) if is_new else None

    def held(self, key: str) -> Claim:
        """The claim of a message already stored (replayed, or claimed by another part)."""
        return Claim(self, key)

    def is_stale(self, age_s: float | None) -> bool:
        """Whether a message sent ``age_s`` seconds ago is too old to answer."""
        return age_s is not None and age_s > self.max_age_s

    async def replay(self) -> list[InboxItem]:
        """What a crash left: the ``pending`` messages to handle again, oldest first; messages
        left ``sending`` (killed while the reply was on the wire, and it almost always arrived)
        are closed as ``reply_in_flight_at_crash not_resent``, never sent again."""
        pending = []
        for item in await self.store.unfinished(self.channel):
            if item.status == "sending":
                await self.store.finish(self.channel, item.message_key,
                                        "reply_in_flight_at_crash not_resent")
                log.warning("inbox_replay_skipped channel=%s key=%s chat_id=%s "
                            "reason=reply_in_flight_at_crash", self.channel, item.message_key,
                            item.chat_id)
                continue
            log.info("inbox_replay channel=%s key=%s chat_id=%s received_at=%s", self.channel,
                     item.message_key, item.chat_id,
                     item.received_at.isoformat(timespec="seconds"))
            pending.append(item)
        return pending


def replica_name() -> str:
    """This process's name in the inbox: host, pid and a random suffix (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def channel_inbox(services, channel: str) -> ChannelInbox:
    """``channel``'s inbox in ``services.db`` (a ``bot.chat.services.Services``): shared by
    replicas when the chat state is (PostgreSQL: ``services.state.is_shared``), else this
    process's."""
    bot = services.settings.bot
    replicas = Replicas(replica_name(), bot.inbox_lease_s, bot.inbox_sweep_s) \
        if services.state.is_shared else None
    return ChannelInbox(Inbox(services.db), channel, bot.inbox_max_age_s, replicas)
