"""The durable inbox of every channel: incoming messages committed before they are acknowledged,
and each one's way to its reply, so nothing received is lost to a crash and nothing answered is
sent twice.

Lives in the bot's database (table ``inbox``, migration ``m006_channels``) and shares its
backend, so a message and the decision it leads to are in one database. A message
is named by ``(channel, message_key)``: the channel's own id as text (Telegram
``<chat_id>/<message_id>/<version>``, WhatsApp the ``wamid``). Its ``status`` goes

    pending  ──mark_sending──▶  sending  ──finish──▶  done
        └───────────────────finish─────────────────────┘

``pending``: stored, not yet answered (replayed after a crash); ``sending``: a reply is on its
way (after a crash it is *not* sent again: it almost always arrived); ``done``: handled,
``outcome`` says how.

Replicas sharing one database (PostgreSQL) also agree on who answers what, with leases: a
replica *takes* a message (``claimed_by``, ``lease_until_s``, migration ``m007_shared_state``)
before answering it and renews the lease while it works; a replica killed mid-answer leaves a
lease that expires, and then any replica may take the message over (:meth:`Inbox.takeable`).
:meth:`Inbox.take_next_in_chat` keeps each chat in order: it hands out a chat's oldest
unfinished message, and nothing of that chat while another replica holds a live lease on an
earlier one. Lease times are Unix seconds (wall clock; replicas' clocks must agree, NTP).

    inbox = Inbox(db)
    if await inbox.claim("whatsapp", wamid, chat_id, payload_json):
        ...                                               # new: handle it
    await inbox.mark_sending("whatsapp", wamid)          # just before the reply goes out
    await inbox.finish("whatsapp", wamid, "replied n=1", decision_id=12)
    for item in await inbox.unfinished("whatsapp"):      # at start-up: what a crash left
        ...
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime

from .db import Database, StoredDecision, _decision_from_row, _storable, _utc_now_iso

STATUSES: tuple[str, ...] = ("pending", "sending", "done")
"""``pending``: stored, not yet handled; ``sending``: a reply is on its way; ``done``."""


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One stored message: ``payload`` is its JSON as the channel sent it; ``received_at`` is
    timezone-aware UTC; ``status`` one of ``STATUSES``; ``decision_id`` the decision it led to
    (None until done, or when it led to none); ``claimed_by`` the replica that last took it and
    ``lease_until_s`` until when (Unix seconds), None when never taken."""

    channel: str
    message_key: str
    chat_id: int | None
    payload: str
    received_at: datetime
    status: str
    outcome: str | None
    decision_id: int | None
    claimed_by: str | None = None
    lease_until_s: float | None = None


class Inbox:
    """Inbox operations over an open :class:`Database` (its backend)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(self, channel: str, message_key: str, chat_id: int | None,
                    payload: str) -> bool:
        """Store a new message as ``pending`` and commit. Returns False, storing nothing, when
        the inbox already holds ``(channel, message_key)``: it was (or is being) handled."""
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "INSERT INTO inbox (channel, message_key, chat_id, payload, received_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel, message_key) DO NOTHING",
                (channel, message_key, chat_id, _storable(payload), _utc_now_iso()))
            return n_rows == 1

    async def mark_sending(self, channel: str, message_key: str,
                           holder: str | None = None) -> bool:
        """Commit that a reply to the message is about to be sent; True when it was
        ``pending`` (False: already ``sending`` or ``done``, or unknown). With ``holder``, also
        False unless ``holder`` still has the message (its lease was not taken over): a replica
        that lost its lease must not send."""
        sql = ("UPDATE inbox SET status = 'sending' WHERE channel = ? AND message_key = ? "
               "AND status = 'pending'")
        params: tuple = (channel, message_key)
        if holder is not None:
            sql, params = sql + " AND claimed_by = ?", (*params, holder)
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(sql, params)
            return n_rows == 1

    async def take(self, channel: str, message_key: str, holder: str, lease_s: float,
                   now_s: float | None = None) -> bool:
        """Take the message for ``holder`` (a replica's name) until ``now_s + lease_s``.

        True when it is ``pending`` and nobody else holds a live lease on it (never taken,
        lease expired, or already ``holder``'s: then the lease is renewed); False when it is
        ``sending``/``done``, unknown, or another replica's lease runs past ``now_s``. One
        UPDATE: of replicas taking one message at once, exactly one gets True.
        """
        now_s = time.time() if now_s is None else now_s
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "UPDATE inbox SET claimed_by = ?, lease_until_s = ? WHERE channel = ? AND "
                "message_key = ? AND status = 'pending' AND (claimed_by IS NULL OR "
                "claimed_by = ? OR lease_until_s <= ?)",
                (holder, now_s + lease_s, channel, message_key, holder, now_s))
            return n_rows == 1

    async def renew(self, channel: str, message_key: str, holder: str, lease_s: float,
                    now_s: float | None = None) -> bool:
        """Extend ``holder``'s lease to ``now_s + lease_s`` while it works on the message;
        False when the message is done or another replica took it over (stop: it answers)."""
        now_s = time.time() if now_s is None else now_s
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "UPDATE inbox SET lease_until_s = ? WHERE channel = ? AND message_key = ? AND "
                "claimed_by = ? AND status <> 'done'",
                (now_s + lease_s, channel, message_key, holder))
            return n_rows == 1

    async def release(self, channel: str, message_key: str, holder: str) -> bool:
        """Give a still ``pending`` message back unanswered (e.g. on shutdown), so another
        replica may take it at once; False when ``holder`` does not have it."""
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "UPDATE inbox SET claimed_by = NULL, lease_until_s = NULL WHERE channel = ? AND "
                "message_key = ? AND claimed_by = ? AND status = 'pending'",
                (channel, message_key, holder))
            return n_rows == 1

    async def takeable(self, now_s: float | None = None, limit: int = 100,
                       channels: tuple[str, ...] = ()) -> list[InboxItem]:
        """``pending`` messages of ``channels`` (empty: every channel) that nobody holds a live
        lease on (never taken, or their replica died or stalled past its lease), oldest first,
        at most ``limit``: what a replica's periodic sweep hands to :meth:`take_next_in_chat`
        (or :meth:`take`)."""
        now_s = time.time() if now_s is None else now_s
        where, params = _in_channels(channels)
        rows = await self.db._fetchall(
            "SELECT * FROM inbox WHERE status = 'pending' AND (claimed_by IS NULL OR "
            f"lease_until_s <= ?){where} ORDER BY id LIMIT ?", (now_s, *params, limit))
        return [_item_from_row(row) for row in rows]

    async def close_abandoned(self, outcome: str, now_s: float | None = None,
                              channels: tuple[str, ...] = ()) -> list[InboxItem]:
        """Mark ``done`` with ``outcome`` every ``sending`` message of ``channels`` (empty:
        every channel) whose lease expired (or that never had one): its replica died while the
        reply was on the wire, and it almost always arrived, so it is not sent again. Returns
        the messages closed (as they were), oldest first."""
        now_s = time.time() if now_s is None else now_s
        where, params = _in_channels(channels)
        async with self.db._transaction() as conn:
            rows = await conn.fetchall(
                "UPDATE inbox SET status = 'done', outcome = ?, done_at = ? WHERE status = "
                f"'sending' AND (lease_until_s IS NULL OR lease_until_s <= ?){where} "
                "RETURNING *", (_storable(outcome), _utc_now_iso(), now_s, *params))
        return sorted((_item_from_row(row) for row in rows), key=lambda item: item.received_at)

    async def take_next_in_chat(self, channel: str, chat_id: int | None, holder: str,
                                lease_s: float, now_s: float | None = None) -> InboxItem | None:
        """Take, for ``holder``, the chat's oldest unfinished message, so one chat's messages
        are answered one at a time in the order received, whichever replicas receive them.

        Returns it (``claimed_by`` ``holder``) or None: the chat has nothing pending, or an
        earlier message of it is still held by a live lease (another replica is answering or
        sending it; that replica takes the next one when done). A ``sending`` message whose
        lease expired (or that never had one) does not hold the chat up: it is not sent again.
        Runs under the chat's lock (:meth:`storage.backend.Tx.lock`). Use this or
        :meth:`take` for a chat's messages, not both: :meth:`take` ignores the order.
        """
        now_s = time.time() if now_s is None else now_s
        async with self.db._transaction() as conn:
            await conn.lock(f"inbox-chat:{channel}:{chat_id}")
            row = await conn.fetchone(
                "SELECT * FROM inbox WHERE channel = ? AND chat_id = ? AND (status = 'pending' "
                "OR (status = 'sending' AND lease_until_s > ?)) ORDER BY id LIMIT 1",
                (channel, chat_id, now_s))
            if row is None or row["status"] != "pending":
                return None
            # the UPDATE checks again what the SELECT saw: the chat's lock does not stop the
            # holder from marking the message sending in between (its reply leaving), and a take
            # that overwrote that would send the reply a second time (issue 30)
            n_rows = await conn.execute(
                "UPDATE inbox SET claimed_by = ?, lease_until_s = ? WHERE id = ? AND "
                "status = 'pending' AND (claimed_by IS NULL OR claimed_by = ? OR "
                "lease_until_s <= ?)", (holder, now_s + lease_s, row["id"], holder, now_s))
            if n_rows != 1:
                return None
        return replace(_item_from_row(row), claimed_by=holder, lease_until_s=now_s + lease_s)

    async def finish(self, channel: str, message_key: str, outcome: str,
                     decision_id: int | None = None, holder: str | None = None) -> bool:
        """Mark the message done with ``outcome`` (a short key=value text) and the decision it
        led to, and commit. Returns False when it was already done (the first outcome is kept)
        or is unknown; with ``holder``, also when another replica took it over (it answers)."""
        sql = ("UPDATE inbox SET status = 'done', outcome = ?, decision_id = ?, done_at = ? "
               "WHERE channel = ? AND message_key = ? AND status <> 'done'")
        params: tuple = (_storable(outcome), decision_id, _utc_now_iso(), channel, message_key)
        if holder is not None:
            sql, params = sql + " AND claimed_by = ?", (*params, holder)
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(sql, params)
            return n_rows == 1

    async def unfinished(self, channel: str) -> list[InboxItem]:
        """The channel's messages not yet done (``pending`` or ``sending``), oldest first."""
        rows = await self.db._fetchall(
            "SELECT * FROM inbox WHERE channel = ? AND status <> 'done' ORDER BY id", (channel,))
        return [_item_from_row(row) for row in rows]

    async def get(self, channel: str, message_key: str) -> InboxItem | None:
        row = await self.db._fetchone(
            "SELECT * FROM inbox WHERE channel = ? AND message_key = ?", (channel, message_key))
        return None if row is None else _item_from_row(row)


async def record_sent(db: Database, channel: str, chat_id: int, message_ids: list[int],
                      decision_id: int) -> None:
    """Remember that the bot's messages ``message_ids`` in the chat carried ``decision_id``
    (a message id sent again replaces its earlier decision)."""
    async with db._transaction() as conn:
        await conn.executemany(
            "DELETE FROM sent_messages WHERE channel = ? AND chat_id = ? AND message_id = ?",
            [(channel, chat_id, m) for m in message_ids])
        await conn.executemany(
            "INSERT INTO sent_messages (channel, chat_id, message_id, decision_id) "
            "VALUES (?, ?, ?, ?)", [(channel, chat_id, m, decision_id) for m in message_ids])


async def decision_of_message(db: Database, channel: str, chat_id: int,
                              message_id: int) -> StoredDecision | None:
    """The latest decision recorded for the user's message ``message_id``, else None."""
    row = await db._fetchone(
        "SELECT * FROM decisions WHERE channel = ? AND chat_id = ? AND message_id = ? "
        "ORDER BY id DESC LIMIT 1", (channel, chat_id, message_id))
    return None if row is None else _decision_from_row(row)


async def decision_of_sent(db: Database, channel: str, chat_id: int,
                           message_id: int) -> StoredDecision | None:
    """The decision a message the bot sent carried (an answer or refusal), else None (a
    command's reply, a notice, or a message sent before this table existed)."""
    row = await db._fetchone(
        "SELECT decisions.* FROM sent_messages JOIN decisions ON decisions.id = "
        "sent_messages.decision_id WHERE sent_messages.channel = ? AND sent_messages.chat_id = ? "
        "AND sent_messages.message_id = ?", (channel, chat_id, message_id))
    return None if row is None else _decision_from_row(row)


def _in_channels(channels: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """An ``AND channel IN (...)`` clause and its parameters (nothing for no channels)."""
    if not channels:
        return "", ()
    return f" AND channel IN ({', '.join('?' * len(channels))})", tuple(channels)


def _item_from_row(row) -> InboxItem:
    return InboxItem(
        channel=row["channel"], message_key=row["message_key"], chat_id=row["chat_id"],
        payload=row["payload"], received_at=datetime.fromisoformat(row["received_at"]),
        status=row["status"], outcome=row["outcome"], decision_id=row["decision_id"],
        claimed_by=row["claimed_by"], lease_until_s=row["lease_until_s"],
    )
