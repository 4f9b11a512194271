"""Numbered schema migrations, recorded in ``_migrations(name, applied_at)``.

Each migration is an ``async def mNNN_description(conn)`` appended to ``MIGRATIONS`` by the
``@migration`` decorator, in file order. ``apply_migrations`` runs the ones not yet recorded,
each inside its own transaction together with its ``_migrations`` row, so a failing migration
leaves neither its tables nor its record behind. Applying twice is a no-op.

Never edit a migration that has shipped: add ``m00N_...`` below it (``ALTER TABLE ... ADD
COLUMN``, or create-copy-rename for anything SQLite cannot alter), and update the pinned schema
in ``tests/test_storage.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import aiosqlite

Migration = Callable[[aiosqlite.Connection], Awaitable[None]]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration; its ``__name__`` is its recorded name."""
    MIGRATIONS.append(fn)
    return fn


async def apply_migrations(
    conn: aiosqlite.Connection, migrations: Sequence[Migration] | None = None
) -> list[str]:
    """Apply every migration in ``migrations`` (default ``MIGRATIONS``) not yet recorded.

    ``conn`` must be in autocommit mode (``isolation_level=None``): transactions here are
    explicit ``BEGIN IMMEDIATE`` … ``COMMIT``. Returns the names applied now, in order
    (empty when the schema is current). A migration that raises is rolled back and re-raised.
    """
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = []
    for fn in MIGRATIONS if migrations is None else migrations:
        name = fn.__name__
        # Checked under the write lock, so two processes opening one file apply each once.
        await conn.execute("BEGIN IMMEDIATE")
        try:
            async with conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)) as cur:
                if await cur.fetchone() is not None:
                    await conn.execute("ROLLBACK")
                    continue
            await fn(conn)
            await conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat(timespec="milliseconds")),
            )
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")
        applied.append(name)
    return applied


@migration
async def m001_create_tables(conn: aiosqlite.Connection) -> None:
    """Decisions (one row per question, with its trace), refusals, per-chat settings.

    Times: ``created_at``/``updated_at`` are UTC ISO 8601 strings; ``*_ms`` are milliseconds.
    ``citations`` and ``trace`` are JSON lists (``Citation`` fields; ``Trace.to_list()``).
    """
    await conn.execute(
        """
        CREATE TABLE decisions (
            id INTEGER PRIMARY KEY,
            chat_id INTEGER NOT NULL,
            message_id INTEGER,
            user_id INTEGER,
            created_at TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('text', 'voice', 'cli')),
            transcript TEXT,
            query TEXT NOT NULL,
            lang TEXT NOT NULL,
            status TEXT NOT NULL,
            mode TEXT NOT NULL,
            answer TEXT NOT NULL,
            answer_lang TEXT NOT NULL,
            message TEXT NOT NULL,
            top_score REAL,
            floor REAL,
            is_low_confidence INTEGER NOT NULL CHECK (is_low_confidence IN (0, 1)),
            citations TEXT NOT NULL,
            trace TEXT NOT NULL,
            total_ms REAL NOT NULL,
            stt_ms REAL,
            reply_ms REAL
        )
        """
    )
    await conn.execute("CREATE INDEX decisions_chat_id ON decisions (chat_id, id)")
    await conn.execute(
        """
        CREATE TABLE refusals (
            id INTEGER PRIMARY KEY,
            decision_id INTEGER NOT NULL UNIQUE REFERENCES decisions (id) ON DELETE CASCADE,
            chat_id INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            status TEXT NOT NULL,
            lang TEXT NOT NULL,
            top_score REAL,
            floor REAL,
            reason TEXT NOT NULL
        )
        """
    )
    await conn.execute("CREATE INDEX refusals_chat_id ON refusals (chat_id, id)")
    await conn.execute(
        """
        CREATE TABLE chat_settings (
            chat_id INTEGER PRIMARY KEY,
            lang TEXT NOT NULL DEFAULT 'auto' CHECK (lang IN ('auto', 'en', 'hi', 'gu', 'te')),
            mode TEXT NOT NULL DEFAULT 'extractive' CHECK (mode IN ('extractive', 'generative')),
            updated_at TEXT NOT NULL
        )
        """
    )


@migration
async def m002_inbox(conn: aiosqlite.Connection) -> None:
    """The durable inbox: every incoming Telegram update, committed before it is acknowledged;
    and ``sent_messages``, the decision behind each message the bot sent.

    ``status`` is ``pending`` (stored, not yet handled), ``sending`` (a reply is on its way to
    Telegram) or ``done`` (handled; ``outcome`` says how, e.g. ``replied decision_id=12``).
    ``version`` is 0 for a new message and the edit date (Unix seconds) for an edited one, so
    (``chat_id``, ``message_id``, ``version``) names one question: a redelivered or replayed
    update with the same key is never answered twice. ``payload`` is the update's JSON as
    Telegram sent it; ``received_at``/``done_at`` are UTC ISO 8601 strings.
    """
    await conn.execute(
        """
        CREATE TABLE inbox (
            update_id INTEGER PRIMARY KEY,
            chat_id INTEGER,
            message_id INTEGER,
            version INTEGER NOT NULL DEFAULT 0,
            payload TEXT NOT NULL,
            received_at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'sending', 'done')),
            outcome TEXT,
            done_at TEXT,
            UNIQUE (chat_id, message_id, version)
        )
        """
    )
    await conn.execute("CREATE INDEX inbox_status ON inbox (status, update_id)")
    # a replayed question finds the decision already recorded for its message
    await conn.execute("CREATE INDEX decisions_message ON decisions (chat_id, message_id)")
    # The bot's own messages and the decision each one carried, so a reply to an answer ("why?")
    # finds that answer's decision, also after a restart.
    await conn.execute(
        """
        CREATE TABLE sent_messages (
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            decision_id INTEGER NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
            PRIMARY KEY (chat_id, message_id)
        )
        """
    )


@migration
async def m003_chat_voice(conn: aiosqlite.Connection) -> None:
    """Per-chat spoken replies (``/voice``): ``auto`` speaks answers to voice notes only, ``on``
    every answer, ``off`` none. Existing chats get ``auto``."""
    await conn.execute(
        "ALTER TABLE chat_settings ADD COLUMN voice TEXT NOT NULL DEFAULT 'auto' "
        "CHECK (voice IN ('auto', 'on', 'off'))"
    )


@migration
async def m004_typed_reasons(conn: aiosqlite.Connection) -> None:
    """Structured outcomes: ``decisions.reason`` holds the refusal's or error's
    :class:`rag.types.Reason` as JSON (code plus its numbers), ``decisions.fallback`` the
    generative fallback code, ``refusals.code`` the reason's code. Rows stored before keep NULL
    there and are worded from their status, score and floor (``bot.render``)."""
    await conn.execute("ALTER TABLE decisions ADD COLUMN reason TEXT")
    await conn.execute("ALTER TABLE decisions ADD COLUMN fallback TEXT")
    await conn.execute("ALTER TABLE refusals ADD COLUMN code TEXT")


@migration
async def m005_whatsapp_messages(conn: aiosqlite.Connection) -> None:
    """The WhatsApp front end's claimed messages (``storage.whatsapp.MessageStore``): one row per
    incoming message id, its JSON, ``pending`` until handled, then ``done`` with the decision it
    led to. ``IF NOT EXISTS``: earlier versions of the front end created this table themselves."""
    await conn.execute(
        """
        CREATE TABLE IF NOT EXISTS whatsapp_messages (
            message_id TEXT PRIMARY KEY,
            chat_id INTEGER NOT NULL,
            kind TEXT NOT NULL,
            received_at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done')),
            decision_id INTEGER,
            outcome TEXT,
            done_at TEXT,
            payload TEXT NOT NULL DEFAULT '{}'
        )
        """
    )


@migration
async def m006_channels(conn: aiosqlite.Connection) -> None:
    """Chats keyed by ``(channel, chat_id)``, and one inbox for every channel.

    ``channel`` names the front end (``telegram``, ``whatsapp``, ``console``, or any later one:
    free text, so a new channel needs no migration). Existing rows get the channel the dashboard
    derived for them before: a chat id that sent a WhatsApp message is ``whatsapp``, chat id 0
    without a message id is ``console``, everything else ``telegram``.

    - ``decisions`` and ``refusals`` gain ``channel``; ``chat_settings`` and ``sent_messages``
      are rebuilt with the channel in their primary key (create, copy, drop, rename: SQLite
      cannot alter a primary key).
    - ``inbox`` (Telegram's updates) and ``whatsapp_messages`` become one ``inbox``: one row
      per incoming message, unique by (``channel``, ``message_key``), the key being the
      channel's own text id (Telegram ``<chat_id>/<message_id>/<version>``, WhatsApp the
      ``wamid``); ``status`` ``pending`` → ``sending`` → ``done`` on every channel.
    """
    derived = """CASE
        WHEN chat_id IN (SELECT chat_id FROM whatsapp_messages) THEN 'whatsapp'
        WHEN chat_id = 0 AND {no_message} THEN 'console'
        ELSE 'telegram' END"""
    await conn.execute("ALTER TABLE decisions ADD COLUMN channel TEXT NOT NULL DEFAULT 'telegram'")
    await conn.execute("UPDATE decisions SET channel = "
                       + derived.format(no_message="message_id IS NULL"))
    await conn.execute("ALTER TABLE refusals ADD COLUMN channel TEXT NOT NULL DEFAULT 'telegram'")
    await conn.execute("UPDATE refusals SET channel = (SELECT d.channel FROM decisions d "
                       "WHERE d.id = refusals.decision_id)")
    await conn.execute("DROP INDEX decisions_chat_id")
    await conn.execute("DROP INDEX decisions_message")
    await conn.execute("DROP INDEX refusals_chat_id")
    await conn.execute("CREATE INDEX decisions_chat ON decisions (channel, chat_id, id)")
    await conn.execute("CREATE INDEX decisions_message ON decisions (channel, chat_id, message_id)")
    await conn.execute("CREATE INDEX refusals_chat ON refusals (channel, chat_id, id)")

    await conn.execute(
        """
        CREATE TABLE chat_settings_new (
            channel TEXT NOT NULL,
            chat_id INTEGER NOT NULL,
            lang TEXT NOT NULL DEFAULT 'auto' CHECK (lang IN ('auto', 'en', 'hi', 'gu', 'te')),
            mode TEXT NOT NULL DEFAULT 'extractive' CHECK (mode IN ('extractive', 'generative')),
            voice TEXT NOT NULL DEFAULT 'auto' CHECK (voice IN ('auto', 'on', 'off')),
            updated_at TEXT NOT NULL,
            PRIMARY KEY (channel, chat_id)
        )
        """
    )
    await conn.execute(
        "INSERT INTO chat_settings_new (channel, chat_id, lang, mode, voice, updated_at) "
        "SELECT " + derived.format(no_message="1 = 1")
        + ", chat_id, lang, mode, voice, updated_at FROM chat_settings")
    await conn.execute("DROP TABLE chat_settings")
    await conn.execute("ALTER TABLE chat_settings_new RENAME TO chat_settings")

    await conn.execute(
        """
        CREATE TABLE sent_messages_new (
            channel TEXT NOT NULL,
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            decision_id INTEGER NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
            PRIMARY KEY (channel, chat_id, message_id)
        )
        """
    )
    await conn.execute(
        "INSERT INTO sent_messages_new (channel, chat_id, message_id, decision_id) "
        "SELECT 'telegram', chat_id, message_id, decision_id FROM sent_messages")
    await conn.execute("DROP TABLE sent_messages")
    await conn.execute("ALTER TABLE sent_messages_new RENAME TO sent_messages")

    await conn.execute(
        """
        CREATE TABLE inbox_new (
            id INTEGER PRIMARY KEY,
            channel TEXT NOT NULL,
            message_key TEXT NOT NULL,
            chat_id INTEGER,
            payload TEXT NOT NULL,
            received_at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'sending', 'done')),
            decision_id INTEGER,
            outcome TEXT,
            done_at TEXT,
            UNIQUE (channel, message_key)
        )
        """
    )
    await conn.execute(
        "INSERT INTO inbox_new (channel, message_key, chat_id, payload, received_at, status, "
        "outcome, done_at) SELECT 'telegram', CASE WHEN chat_id IS NULL OR message_id IS NULL "
        "THEN 'update/' || CAST(update_id AS TEXT) ELSE CAST(chat_id AS TEXT) || '/' || "
        "CAST(message_id AS TEXT) || '/' || CAST(version AS TEXT) END, chat_id, payload, "
        "received_at, status, outcome, done_at FROM inbox ORDER BY update_id")
    await conn.execute(
        "INSERT INTO inbox_new (channel, message_key, chat_id, payload, received_at, status, "
        "decision_id, outcome, done_at) SELECT 'whatsapp', message_id, chat_id, payload, "
        "received_at, status, decision_id, outcome, done_at FROM whatsapp_messages "
        "ORDER BY received_at")
    await conn.execute("DROP TABLE inbox")
    await conn.execute("DROP TABLE whatsapp_messages")
    await conn.execute("ALTER TABLE inbox_new RENAME TO inbox")
    await conn.execute("CREATE INDEX inbox_status ON inbox (status, id)")
