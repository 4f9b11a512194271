"""Replicas answering one inbox (PostgreSQL): each chat's messages one at a time, in the order
received, whichever replica stored them; a dead replica's messages taken over after its lease.

One :class:`ChatDispatcher` per channel and process (``bot.chat.inbox.ChannelInbox.open``,
which wraps each message taken in its claim). Mechanics:

- **notify**: a replica that committed a message calls :meth:`ChatDispatcher.notify` with its
  chat; unless this process already drains that chat, a task does: ``take_next_in_chat``
  (under the chat's lock in the database) hands out the chat's oldest unfinished message, or
  nothing while another replica holds a live lease on an earlier one (that replica takes the
  next when done). Each message taken is handled under a lease of ``BOT_INBOX_LEASE_S``,
  renewed every third of it while the front end works, then the next one is taken.
- **sweep**, every ``BOT_INBOX_SWEEP_S`` (and at start): messages ``sending`` whose lease
  expired are closed ``reply_in_flight_at_crash not_resent`` (their replica died with the reply
  on the wire: at most once); chats with a message nobody holds (never taken, or its lease
  expired) are notified.
- **failures**: a database error while taking or finishing (PostgreSQL restarting) is logged
  and the chat retried after a back-off (the lease is this replica's, so it takes the same
  message again); whatever is left is found by a later sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from bot.chat.tasks import raise_if_cancelled, stop_tasks
from bot.errors import BotError
from storage.backend import driver_errors
from storage.inbox import Inbox, InboxItem

log = logging.getLogger(__name__)

MAX_RETRIES = 6
"""Back-offs (1, 2, 4, 5, 5, 5 s: ~22 s, a PostgreSQL restart or fail-over) before a chat is
left to the next sweep."""
CLOSE_WAIT_S = 10.0
"""Seconds :meth:`ChatDispatcher.aclose` lets answers under way finish (SIGTERM, a deploy)."""
IN_FLIGHT_OUTCOME = "reply_in_flight_at_crash not_resent"


class LeaseLostError(BotError):
    """This replica no longer holds the message (its lease expired and another replica took it
    over): the reply must not go out from here."""


@dataclass(frozen=True, slots=True)
class Replicas:
    """How this replica shares the inbox: its name (``holder``), the lease it takes on a message
    (``lease_s``: ``BOT_INBOX_LEASE_S``) and the time between sweeps (``sweep_s``:
    ``BOT_INBOX_SWEEP_S``)."""

    holder: str
    lease_s: float
    sweep_s: float


class ChatDispatcher:
    """Takes ``channel``'s messages in ``store`` chat by chat for ``handle`` (see the module),
    which answers one message taken for :attr:`holder` and stores its outcome. It raises a
    database error (or :class:`LeaseLostError`) to leave the message unfinished."""

    def __init__(self, store: Inbox, channel: str,
                 handle: Callable[[InboxItem], Awaitable[None]], replicas: Replicas) -> None:
        self.store, self.channel, self.handle, self.replicas = store, channel, handle, replicas
        self._drains: dict[int | None, asyncio.Task[None]] = {}
        self._again: set[int | None] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._renewals: set[asyncio.Task[None]] = set()
        self._is_closing = False

    @property
    def holder(self) -> str:
        return self.replicas.holder

    async def start(self) -> None:
        """Sweep once now (what dead replicas left), then every ``sweep_s`` seconds."""
        log.info("inbox_dispatch channel=%s holder=%s lease_s=%.1f sweep_s=%.1f",
                 self.channel, self.holder, self.replicas.lease_s, self.replicas.sweep_s)
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="inbox_sweep")

    def notify(self, chat_id: int | None) -> None:
        """The chat has a new message (or one nobody holds): drain it unless already draining
        (then the drain looks once more before it ends). Once closing, nothing new is taken:
        the message stays in the inbox for another replica (or this one's next start)."""
        if self._is_closing:
            return
        task = self._drains.get(chat_id)
        if task is not None and not task.done():
            self._again.add(chat_id)
            return
        self._drains[chat_id] = asyncio.create_task(self._drain(chat_id),
                                                    name=f"inbox_drain:{chat_id}")

    async def _drain(self, chat_id: int | None) -> None:
        channel, n_failures = self.channel, 0
        try:
            while not self._is_closing:  # closing: finish the answer under way, take no more
                self._again.discard(chat_id)
                try:
                    item = await self.store.take_next_in_chat(
                        channel, chat_id, self.holder, self.replicas.lease_s)
                    if item is not None:
                        log.info("inbox_taken channel=%s key=%s chat_id=%s holder=%s", channel,
                                 item.message_key, chat_id, self.holder)
                        async with self._renewing(item.message_key):
                            await self.handle(item)
                        n_failures = 0
                        continue
                except LeaseLostError:
                    continue  # another replica answers it; ours is the chat's next, if any
                except driver_errors() as exc:
                    raise_if_cancelled()
                    n_failures += 1
                    log.warning("inbox_dispatch_failed channel=%s chat_id=%s attempt=%d "
                                "detail=%s", channel, chat_id, n_failures,
                                str(exc).strip()[:200])
                    if n_failures > MAX_RETRIES:
                        return  # the next sweep finds what is left
                    await asyncio.sleep(min(2.0 ** (n_failures - 1), 5.0))
                    continue
                except Exception:  # a bug must not leave the chat without a drain silently
                    log.exception("inbox_dispatch_error channel=%s chat_id=%s", channel, chat_id)
                    return
                if chat_id not in self._again:
                    return
        finally:
            if self._drains.get(chat_id) is asyncio.current_task():
                del self._drains[chat_id]

    @contextlib.asynccontextmanager
    async def _renewing(self, key: str) -> AsyncIterator[None]:
        """Renew the lease on message ``key`` every third of ``lease_s`` while the block runs.

        The renewing task is told to stop and cancelled when the block ends, but not awaited
        (:meth:`aclose` bounds what is left): a cancelled psycopg query on a connection that
        broke (PostgreSQL restarting) raises ``OperationalError`` instead of ``CancelledError``,
        so the task ends by its own flag or :func:`~bot.chat.tasks.raise_if_cancelled`, and a
        renewal landing after the message is done changes nothing."""
        is_done = asyncio.Event()

        async def renew() -> None:
            while not is_done.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(is_done.wait(), self.replicas.lease_s / 3)
                if is_done.is_set():
                    return
                try:
                    if not await self.store.renew(self.channel, key, self.holder,
                                                  self.replicas.lease_s):
                        log.warning("inbox_renew_refused channel=%s key=%s holder=%s",
                                    self.channel, key, self.holder)
                        return
                except driver_errors() as exc:
                    raise_if_cancelled()
                    log.warning("inbox_renew_failed channel=%s key=%s detail=%s",
                                self.channel, key, str(exc).strip()[:200])

        task = asyncio.create_task(renew(), name=f"inbox_renew:{key}")
        self._renewals.add(task)
        task.add_done_callback(self._renewals.discard)
        try:
            yield
        finally:
            is_done.set()
            task.cancel()

    async def sweep(self) -> int:
        """One sweep (see the module); returns the number of chats notified."""
        channels = (self.channel,)
        for item in await self.store.close_abandoned(IN_FLIGHT_OUTCOME, channels=channels):
            log.warning("inbox_replay_skipped channel=%s key=%s chat_id=%s "
                        "reason=reply_in_flight_at_crash holder=%s", item.channel,
                        item.message_key, item.chat_id, item.claimed_by)
        chats = []
        for item in await self.store.takeable(channels=channels, limit=500):
            if item.claimed_by is not None and item.claimed_by != self.holder:
                log.info("inbox_lease_expired channel=%s key=%s chat_id=%s holder=%s",
                         item.channel, item.message_key, item.chat_id, item.claimed_by)
            if item.chat_id not in chats:
                chats.append(item.chat_id)
        for chat_id in chats:
            self.notify(chat_id)
        return len(chats)

    async def _sweep_forever(self) -> None:
        while not self._is_closing:
            try:
                await self.sweep()
            except driver_errors() as exc:
                raise_if_cancelled()
                log.warning("inbox_sweep_failed channel=%s detail=%s", self.channel,
                            str(exc).strip()[:200])
            await asyncio.sleep(self.replicas.sweep_s)

    async def aclose(self) -> None:
        """Stop sweeping and taking messages; let answers under way finish for up to
        :data:`CLOSE_WAIT_S`, then cancel them (their leases expire and another replica takes
        them). Bounded: at most :data:`~bot.chat.tasks.STOP_WAIT_S` for the sweep,
        ``CLOSE_WAIT_S`` for the answers and ``STOP_WAIT_S`` for them and the lease renewals
        to end once cancelled; what is still running then is logged and abandoned
        (``task_abandoned``)."""
        self._is_closing = True
        await stop_tasks([self._sweeper], "inbox_sweep")
        drains = [t for t in self._drains.values() if not t.done()]
        if drains:
            await asyncio.wait(drains, timeout=CLOSE_WAIT_S)
        await stop_tasks([*drains, *self._renewals], "inbox_answer")
