"""The durable inbox: incoming updates committed to the database before they are acknowledged.

Lives in the bot's database (table ``inbox``, migration ``m002_inbox``) and shares its
backend, so an update and the decision it leads to are in one database.

    inbox = Inbox(db)
    if await inbox.add(update_id, chat_id, message_id, version, payload_json):
        ...  # new: handle it
    await inbox.mark_sending(update_id)        # just before the reply goes out
    await inbox.finish(update_id, "replied decision_id=12")
    for item in await inbox.unfinished():      # at start-up: what a crash left behind
        ...
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .db import Database, StoredDecision, _decision_from_row, _storable, _utc_now_iso

STATUSES: tuple[str, ...] = ("pending", "sending", "done")
"""``pending``: stored, not yet handled; ``sending``: a reply is on its way; ``done``."""


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One stored update: ``payload`` is its JSON as Telegram sent it; ``received_at`` is
    timezone-aware UTC; ``status`` one of ``STATUSES``."""

    update_id: int
    chat_id: int | None
    message_id: int | None
    version: int
    payload: str
    received_at: datetime
    status: str
    outcome: str | None


class Inbox:
    """Inbox operations over an open :class:`Database` (its connection and write lock)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, update_id: int, chat_id: int | None, message_id: int | None,
                  version: int, payload: str) -> bool:
        """Store a new update as ``pending`` and commit. Returns False, storing nothing, when
        the inbox already holds this ``update_id`` (Telegram redelivered it) or this
        (``chat_id``, ``message_id``, ``version``): it was or is being handled already."""
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "INSERT INTO inbox (update_id, chat_id, message_id, version, payload, "
                "received_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (update_id, chat_id, message_id, version, _storable(payload), _utc_now_iso()),
            )
            return n_rows == 1

    async def mark_sending(self, update_id: int) -> None:
        """Commit that a reply to ``update_id`` is about to be sent (unless already done)."""
        async with self.db._transaction() as conn:
            await conn.execute(
                "UPDATE inbox SET status = 'sending' WHERE update_id = ? AND status = 'pending'",
                (update_id,))

    async def finish(self, update_id: int, outcome: str) -> bool:
        """Mark ``update_id`` done with ``outcome`` (a short key=value text) and commit.
        Returns False when it was already done (the first outcome is kept) or is unknown."""
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "UPDATE inbox SET status = 'done', outcome = ?, done_at = ? "
                "WHERE update_id = ? AND status != 'done'",
                (_storable(outcome), _utc_now_iso(), update_id))
            return n_rows == 1

    async def unfinished(self) -> list[InboxItem]:
        """Updates not yet done (``pending`` or ``sending``), oldest first."""
        rows = await self.db._fetchall(
            "SELECT * FROM inbox WHERE status != 'done' ORDER BY update_id", ())
        return [_item_from_row(row) for row in rows]

    async def get(self, update_id: int) -> InboxItem | None:
        row = await self.db._fetchone("SELECT * FROM inbox WHERE update_id = ?", (update_id,))
        return None if row is None else _item_from_row(row)


async def record_sent(db: Database, chat_id: int, message_ids: list[int],
                      decision_id: int) -> None:
    """Remember that the bot's messages ``message_ids`` in ``chat_id`` carried ``decision_id``."""
    async with db._transaction() as conn:
        await conn.executemany(
            "INSERT INTO sent_messages (chat_id, message_id, decision_id) VALUES (?, ?, ?) "
            "ON CONFLICT (chat_id, message_id) DO UPDATE SET decision_id = excluded.decision_id",
            [(chat_id, m, decision_id) for m in message_ids])


async def decision_of_message(db: Database, chat_id: int,
                              message_id: int) -> StoredDecision | None:
    """The latest decision recorded for the user's message ``message_id``, else None."""
    row = await db._fetchone(
        "SELECT * FROM decisions WHERE chat_id = ? AND message_id = ? ORDER BY id DESC LIMIT 1",
        (chat_id, message_id))
    return None if row is None else _decision_from_row(row)


async def decision_of_sent(db: Database, chat_id: int, message_id: int) -> StoredDecision | None:
    """The decision a message the bot sent carried (an answer or refusal), else None (a
    command's reply, a notice, or a message sent before this table existed)."""
    row = await db._fetchone(
        "SELECT decisions.* FROM sent_messages JOIN decisions ON decisions.id = "
        "sent_messages.decision_id WHERE sent_messages.chat_id = ? AND "
        "sent_messages.message_id = ?", (chat_id, message_id))
    return None if row is None else _decision_from_row(row)


def _item_from_row(row) -> InboxItem:
    return InboxItem(
        update_id=row["update_id"], chat_id=row["chat_id"], message_id=row["message_id"],
        version=row["version"], payload=row["payload"],
        received_at=datetime.fromisoformat(row["received_at"]), status=row["status"],
        outcome=row["outcome"],
    )
