"""WhatsApp messages committed to the database before the webhook answers 200, so a redelivery, even
after a restart, is answered once, and a message claimed but not finished is replayed.

Lives in the bot's database (table ``whatsapp_messages``, migration
``m005_whatsapp_messages``) and shares its backend.
"""

from __future__ import annotations

import json
from typing import Any

from .db import Database, _utc_now_iso


class MessageStore:
    """``whatsapp_messages`` (migration ``m005_whatsapp_messages``): one row per incoming
    message id, claimed before the webhook's 200; its ``decision_id`` and ``outcome`` once
    handled."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(self, message: dict[str, Any]) -> bool:
        """True the first time ``message["id"]`` is seen (now stored with the message's JSON),
        False for a redelivery."""
        async with self.db._transaction() as conn:
            n_rows = await conn.execute(
                "INSERT INTO whatsapp_messages (message_id, chat_id, kind, received_at,"
                " payload) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (message["id"], int(message["from"]), str(message.get("type", "unknown")),
                 _utc_now_iso(), json.dumps(message, ensure_ascii=False)))
            return n_rows == 1

    async def pending(self) -> list[dict[str, Any]]:
        """The messages claimed but never finished (a crash or kill while handling them), as
        the webhook carried them, oldest first."""
        rows = await self.db._fetchall(
            "SELECT payload FROM whatsapp_messages WHERE status = 'pending' "
            "ORDER BY received_at", ())
        return [json.loads(row["payload"]) for row in rows]

    async def finish(self, message_id: str, decision_id: int | None, outcome: str) -> None:
        async with self.db._transaction() as conn:
            await conn.execute(
                "UPDATE whatsapp_messages SET status = 'done', decision_id = ?, outcome = ?, "
                "done_at = ? WHERE message_id = ?",
                (decision_id, outcome, _utc_now_iso(), message_id))

    async def get(self, message_id: str) -> dict[str, Any] | None:
        row = await self.db._fetchone("SELECT * FROM whatsapp_messages WHERE message_id = ?",
                                      (message_id,))
        return dict(row) if row is not None else None
