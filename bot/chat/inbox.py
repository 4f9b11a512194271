"""The durable inbox as every channel uses it: claim a message before acknowledging it, mark it
``sending`` right before its reply leaves, ``done`` with its outcome; at start-up replay what a
crash left ``pending`` and close, without sending again, what it left ``sending``.

The front end only names its messages (``(channel, message_key)``, the key being the channel's
own id as text) and keeps their JSON; the states and the replay rule are decided here, once.
The table is ``storage.inbox``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.inbox import Inbox, InboxItem

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Claim:
    """One claimed message while it is handled: ``outcome`` and ``decision_id`` are stored by
    :meth:`finish`."""

    inbox: ChannelInbox
    key: str
    outcome: str = "no_reply"
    decision_id: int | None = None

    async def sending(self) -> None:
        """Commit that a reply to this message is about to leave (a no-op once marked)."""
        await self.inbox.store.mark_sending(self.inbox.channel, self.key)

    async def finish(self) -> None:
        """Commit the message ``done`` with its outcome; log it (once)."""
        if await self.inbox.store.finish(self.inbox.channel, self.key, self.outcome,
                                         self.decision_id):
            log.info("inbox_done channel=%s key=%s outcome=%s", self.inbox.channel, self.key,
                     self.outcome)


@dataclass(slots=True)
class ChannelInbox:
    """One channel's view of the durable inbox; ``max_age_s`` (``BOT_INBOX_MAX_AGE_S``) is the
    age after which a question gets an apology instead of a late answer."""

    store: Inbox
    channel: str
    max_age_s: float

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
