"""Numbered schema migrations, recorded in ``_migrations(name, applied_at)``, the same for
SQLite and PostgreSQL.

Each migration is an ``async def mNNN_description(conn)`` appended to ``MIGRATIONS`` by the
``@migration`` decorator, in file order; ``conn`` is a :class:`storage.backend.Tx` whose
``dialect`` says which database it is. Column types come from
:func:`storage.backend.sql_types` (``INTEGER``/``REAL`` on SQLite, ``BIGINT``/``DOUBLE
PRECISION`` on PostgreSQL); any other dialect-specific SQL is an explicit ``if conn.dialect``.
``apply_migrations`` runs the ones not yet recorded, each inside its own transaction together
with its ``_migrations`` row, so a failing migration leaves neither its tables nor its record
behind. Applying twice is a no-op, and processes starting together apply each migration once:
on PostgreSQL the whole run holds ``pg_advisory_lock`` (:data:`MIGRATION_LOCK`), on SQLite each
migration is checked and applied inside ``BEGIN IMMEDIATE``.

Never edit a migration that has shipped: add ``m00N_...`` below it (``ALTER TABLE ... ADD
COLUMN``, or create-copy-rename for anything SQLite cannot alter), and update the pinned schema
in ``tests/test_storage.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import aiosqlite

from .backend import POSTGRESQL, Backend, SqliteTx, Tx, sql_types

Migration = Callable[[Tx], Awaitable[None]]

MIGRATIONS: list[Migration] = []

MIGRATION_LOCK = 7_240_242_024  # pg_advisory_lock key held while migrations run (any bigint)


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration; its ``__name__`` is its recorded name."""
    MIGRATIONS.append(fn)
    return fn


async def apply_migrations(
    target: Backend | Tx | aiosqlite.Connection, migrations: Sequence[Migration] | None = None
) -> list[str]:
    """Apply every migration in ``migrations`` (default ``MIGRATIONS``) not yet recorded.

    ``target`` is an open :class:`Backend` (a connection of its own is used), a :class:`Tx` in
    autocommit mode, or an aiosqlite connection opened with ``isolation_level=None``:
    transactions here are explicit (``BEGIN IMMEDIATE``/``BEGIN`` … ``COMMIT``). Returns the
    names applied now, in order (empty when the schema is current). A migration that raises is
    rolled back and re-raised.
    """
    if isinstance(target, Backend):
        async with target.session() as tx:
            return await apply_migrations(tx, migrations)
    tx = SqliteTx(target) if isinstance(target, aiosqlite.Connection) else target
    if tx.dialect == POSTGRESQL:
        await tx.execute("SELECT pg_advisory_lock(?)", (MIGRATION_LOCK,))
        try:
            return await _apply(tx, migrations)
        finally:
            await tx.execute("SELECT pg_advisory_unlock(?)", (MIGRATION_LOCK,))
    return await _apply(tx, migrations)


async def _apply(tx: Tx, migrations: Sequence[Migration] | None) -> list[str]:
    await tx.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = []
    for fn in MIGRATIONS if migrations is None else migrations:
        name = fn.__name__
        # Checked under the write lock, so two processes opening one file apply each once.
        await tx.begin()
        try:
            if await tx.fetchone("SELECT 1 FROM _migrations WHERE name = ?", (name,)):
                await tx.rollback()
                continue
            await fn(tx)
            await tx.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat(timespec="milliseconds")),
            )
        except BaseException:
            await tx.rollback()
            raise
        await tx.commit()
        applied.append(name)
    return applied


@migration
async def m001_create_tables(conn: Tx) -> None:
    """Decisions (one row per question, with its trace), refusals, per-chat settings.

    Times: ``created_at``/``updated_at`` are UTC ISO 8601 strings; ``*_ms`` are milliseconds.
    ``citations`` and ``trace`` are JSON lists (``Citation`` fields; ``Trace.to_list()``).
    """
    t = sql_types(conn.dialect)
    await conn.execute(
        f"""
        CREATE TABLE decisions (
            id {t.id_pk},
            chat_id {t.integer} NOT NULL,
            message_id {t.integer},
            user_id {t.integer},
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
            top_score {t.real},
            floor {t.real},
            is_low_confidence {t.integer} NOT NULL CHECK (is_low_confidence IN (0, 1)),
            citations TEXT NOT NULL,
            trace TEXT NOT NULL,
            total_ms {t.real} NOT NULL,
            stt_ms {t.real},
            reply_ms {t.real}
        )
        """
    )
    await conn.execute("CREATE INDEX decisions_chat_id ON decisions (chat_id, id)")
    await conn.execute(
        f"""
        CREATE TABLE refusals (
            id {t.id_pk},
            decision_id {t.integer} NOT NULL UNIQUE REFERENCES decisions (id) ON DELETE CASCADE,
            chat_id {t.integer} NOT NULL,
            created_at TEXT NOT NULL,
            status TEXT NOT NULL,
            lang TEXT NOT NULL,
            top_score {t.real},
            floor {t.real},
            reason TEXT NOT NULL
        )
        """
    )
    await conn.execute("CREATE INDEX refusals_chat_id ON refusals (chat_id, id)")
    await conn.execute(
        f"""
        CREATE TABLE chat_settings (
            chat_id {t.integer} PRIMARY KEY,
            lang TEXT NOT NULL DEFAULT 'auto' CHECK (lang IN ('auto', 'en', 'hi', 'gu', 'te')),
            mode TEXT NOT NULL DEFAULT 'extractive' CHECK (mode IN ('extractive', 'generative')),
            updated_at TEXT NOT NULL
        )
        """
    )


@migration
async def m002_inbox(conn: Tx) -> None:
    """The durable inbox: every incoming Telegram update, committed before it is acknowledged;
    and ``sent_messages``, the decision behind each message the bot sent.

    ``status`` is ``pending`` (stored, not yet handled), ``sending`` (a reply is on its way to
    Telegram) or ``done`` (handled; ``outcome`` says how, e.g. ``replied decision_id=12``).
    ``version`` is 0 for a new message and the edit date (Unix seconds) for an edited one, so
    (``chat_id``, ``message_id``, ``version``) names one question: a redelivered or replayed
    update with the same key is never answered twice. ``payload`` is the update's JSON as
    Telegram sent it; ``received_at``/``done_at`` are UTC ISO 8601 strings.
    """
    t = sql_types(conn.dialect)
    await conn.execute(
        f"""
        CREATE TABLE inbox (
            update_id {t.integer} PRIMARY KEY,
            chat_id {t.integer},
            message_id {t.integer},
            version {t.integer} NOT NULL DEFAULT 0,
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
        f"""
        CREATE TABLE sent_messages (
            chat_id {t.integer} NOT NULL,
            message_id {t.integer} NOT NULL,
            decision_id {t.integer} NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
            PRIMARY KEY (chat_id, message_id)
        )
        """
    )


@migration
async def m003_chat_voice(conn: Tx) -> None:
    """Per-chat spoken replies (``/voice``): ``auto`` speaks answers to voice notes only, ``on``
    every answer, ``off`` none. Existing chats get ``auto``."""
    await conn.execute(
        "ALTER TABLE chat_settings ADD COLUMN voice TEXT NOT NULL DEFAULT 'auto' "
        "CHECK (voice IN ('auto', 'on', 'off'))"
    )


@migration
async def m004_typed_reasons(conn: Tx) -> None:
    """Structured outcomes: ``decisions.reason`` holds the refusal's or error's
    :class:`rag.types.Reason` as JSON (code plus its numbers), ``decisions.fallback`` the
    generative fallback code, ``refusals.code`` the reason's code. Rows stored before keep NULL
    there and are worded from their status, score and floor (``bot.chat.render``)."""
    await conn.execute("ALTER TABLE decisions ADD COLUMN reason TEXT")
    await conn.execute("ALTER TABLE decisions ADD COLUMN fallback TEXT")
    await conn.execute("ALTER TABLE refusals ADD COLUMN code TEXT")


@migration
async def m005_whatsapp_messages(conn: Tx) -> None:
    """The WhatsApp front end's claimed messages (``storage.whatsapp.MessageStore``): one row per
    incoming message id, its JSON, ``pending`` until handled, then ``done`` with the decision it
    led to. ``IF NOT EXISTS``: earlier versions of the front end created this table themselves."""
    t = sql_types(conn.dialect)
    await conn.execute(
        f"""
        CREATE TABLE IF NOT EXISTS whatsapp_messages (
            message_id TEXT PRIMARY KEY,
            chat_id {t.integer} NOT NULL,
            kind TEXT NOT NULL,
            received_at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done')),
            decision_id {t.integer},
            outcome TEXT,
            done_at TEXT,
            payload TEXT NOT NULL DEFAULT '{{}}'
        )
        """
    )


@migration
async def m006_channels(conn: Tx) -> None:
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
    t = sql_types(conn.dialect)
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
        f"""
        CREATE TABLE chat_settings_new (
            channel TEXT NOT NULL,
            chat_id {t.integer} NOT NULL,
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
        f"""
        CREATE TABLE sent_messages_new (
            channel TEXT NOT NULL,
            chat_id {t.integer} NOT NULL,
            message_id {t.integer} NOT NULL,
            decision_id {t.integer} NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
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
        f"""
        CREATE TABLE inbox_new (
            id {t.id_pk},
            channel TEXT NOT NULL,
            message_key TEXT NOT NULL,
            chat_id {t.integer},
            payload TEXT NOT NULL,
            received_at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'sending', 'done')),
            decision_id {t.integer},
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


@migration
async def m007_shared_state(conn: Tx) -> None:
    """What replicas must agree on beyond decisions and settings (times in Unix seconds):

    - ``inbox.claimed_by`` and ``inbox.lease_until_s``: which replica answers a message, until
      when (:meth:`storage.inbox.Inbox.take`; NULL: nobody yet, or a single process that never
      takes leases); ``inbox_chat`` finds a chat's oldest unfinished message;
    - ``rate_events`` (one row per allowed event still in its window) and ``rate_limits`` (when a
      key was told to wait, when last refused): :mod:`storage.ratelimit`;
    - ``repeats``: each chat's questions within the repeat window, :mod:`storage.repeats`;
    - ``voice_cache``: where each spoken reply's audio is, :mod:`storage.voice_index`.
    """
    t = sql_types(conn.dialect)
    await conn.execute("ALTER TABLE inbox ADD COLUMN claimed_by TEXT")
    await conn.execute(f"ALTER TABLE inbox ADD COLUMN lease_until_s {t.real}")
    await conn.execute("CREATE INDEX inbox_chat ON inbox (channel, chat_id, status, id)")
    await conn.execute(
        f"""
        CREATE TABLE rate_events (
            id {t.id_pk},
            key TEXT NOT NULL,
            at_s {t.real} NOT NULL
        )
        """
    )
    await conn.execute("CREATE INDEX rate_events_key ON rate_events (key, at_s)")
    await conn.execute("CREATE INDEX rate_events_at ON rate_events (at_s)")
    await conn.execute(
        f"""
        CREATE TABLE rate_limits (
            key TEXT PRIMARY KEY,
            told_at_s {t.real} NOT NULL,
            refused_at_s {t.real} NOT NULL
        )
        """
    )
    await conn.execute(
        f"""
        CREATE TABLE repeats (
            chat TEXT NOT NULL,
            question_key TEXT NOT NULL,
            message_key TEXT,
            at_s {t.real} NOT NULL,
            n_repeats {t.integer} NOT NULL DEFAULT 0,
            PRIMARY KEY (chat, question_key)
        )
        """
    )
    await conn.execute("CREATE INDEX repeats_at ON repeats (at_s)")
    await conn.execute(
        f"""
        CREATE TABLE voice_cache (
            key TEXT PRIMARY KEY,
            location TEXT NOT NULL,
            duration_s {t.real} NOT NULL,
            n_bytes {t.integer} NOT NULL,
            used_at_s {t.real} NOT NULL
        )
        """
    )
    await conn.execute("CREATE INDEX voice_cache_used ON voice_cache (used_at_s)")


@migration
async def m008_decision_searched(conn: Tx) -> None:
    """``decisions.searched``: what the pipeline searched when it differs from the question as
    the user typed it (``query``): Hindi typed in Latin letters is searched in Devanagari
    (``rag.romanized``), spoken fillers removed; NULL when the same and in older rows."""
    await conn.execute("ALTER TABLE decisions ADD COLUMN searched TEXT")


@migration
async def m009_decision_best_passage(conn: Tx) -> None:
    """``decisions.best_passage_id`` and ``best_passage_score`` (cosine): the search's first hit
    (``Result.best_passage_id``), so the dashboard reads a refusal's closest passage from a
    column instead of parsing the trace's wording; NULL when nothing was searched or found, and
    in older rows."""
    t = sql_types(conn.dialect)
    await conn.execute("ALTER TABLE decisions ADD COLUMN best_passage_id TEXT")
    await conn.execute(f"ALTER TABLE decisions ADD COLUMN best_passage_score {t.real}")


@migration
async def m010_web_conversations(conn: Tx) -> None:
    """The web page's conversations, so a restart keeps them and any replica serves any session
    (:mod:`storage.web_exchanges`), and what the input guard cut:

    - ``web_exchanges``: one row per message of a browser session (``chat_id``, the inbox's
      ``message_key``), its ``question`` as shown, ``is_voice``, the page's ``view`` of the
      reply (JSON, the front end's; NULL until answered), ``is_done``, the spoken reply
      (``voice_ogg``, OGG/Opus, ``voice_s`` seconds), the recording until it is answered
      (``upload``), and when it was made and last changed (Unix seconds); binary columns are
      ``BLOB`` on SQLite, ``BYTEA`` on PostgreSQL;
    - ``decisions.cut``: JSON of ``rag.types.QuestionCut`` (characters the question had, read,
      the limit) when the question was cut to the input guard's limit; NULL otherwise and in
      older rows.
    """
    t = sql_types(conn.dialect)
    blob = "BYTEA" if conn.dialect == POSTGRESQL else "BLOB"
    await conn.execute(
        f"""
        CREATE TABLE web_exchanges (
            id {t.id_pk},
            chat_id {t.integer} NOT NULL,
            message_key TEXT NOT NULL UNIQUE,
            question TEXT NOT NULL,
            is_voice {t.integer} NOT NULL DEFAULT 0,
            view TEXT,
            is_done {t.integer} NOT NULL DEFAULT 0,
            voice_ogg {blob},
            voice_s {t.real},
            upload {blob},
            created_at_s {t.real} NOT NULL,
            updated_at_s {t.real} NOT NULL
        )
        """
    )
    await conn.execute("CREATE INDEX web_exchanges_chat ON web_exchanges (chat_id, id)")
    await conn.execute("CREATE INDEX web_exchanges_updated ON web_exchanges (updated_at_s)")
    await conn.execute("ALTER TABLE decisions ADD COLUMN cut TEXT")


@migration
async def m011_chat_context(conn: Tx) -> None:
    """Follow-up questions (issue 44): ``chat_context``, each chat's conversation context, and
    ``decisions.followup``.

    ``chat_context`` holds one row per ``(channel, chat_id)``, in the database so replicas
    share it and a restart keeps it (:mod:`bot.chat.conversation` decides when it is used):
    ``question`` the last question as it was searched, its ``lang``, ``passage_ids`` the
    passages its reply cited (a JSON list of ids, best first; ``[]`` after a refusal),
    ``answer`` the answer text shown (``''`` after a refusal), ``at_s`` when it was answered
    (Unix seconds) and ``n_followups``, how many follow-ups in a row the context has carried
    (0: the question was read on its own).

    ``decisions.followup`` is the pipeline's reading of a message that came after a previous
    turn (:class:`rag.types.FollowUpReading` as JSON: ``is_followup``, ``searched``,
    ``detail``); NULL when the message came with no context, and in older rows.
    """
    t = sql_types(conn.dialect)
    await conn.execute(
        f"""
        CREATE TABLE chat_context (
            channel TEXT NOT NULL,
            chat_id {t.integer} NOT NULL,
            question TEXT NOT NULL,
            lang TEXT NOT NULL,
            passage_ids TEXT NOT NULL,
            answer TEXT NOT NULL,
            at_s {t.real} NOT NULL,
            n_followups {t.integer} NOT NULL DEFAULT 0 CHECK (n_followups >= 0),
            PRIMARY KEY (channel, chat_id)
        )
        """
    )
    await conn.execute("ALTER TABLE decisions ADD COLUMN followup TEXT")


@migration
async def m012_decision_facts(conn: Tx) -> None:
    """Facts the chat layer and the dashboard read as fields, not out of text (issue 41):
    ``decisions.language_basis`` (how the question's language was decided and what was
    searched: :class:`rag.types.LanguageBasis` as JSON; NULL where the language stage did not
    run, and in older rows) and ``decisions.tts_failure`` (why the spoken reply could not be
    made: the speech client's reason, e.g. ``timeout`` or ``server_error``, or ``encode`` when
    its WAV could not be encoded; NULL when it was made or not asked for, and in older rows,
    which are backfilled here from the failed stage's text, as the dashboard read it before)."""
    await conn.execute("ALTER TABLE decisions ADD COLUMN language_basis TEXT")
    await conn.execute("ALTER TABLE decisions ADD COLUMN tts_failure TEXT")
    rows = await conn.fetchall(
        "SELECT id, trace FROM decisions WHERE trace LIKE '%\"failed\"%'", ())
    for decision_id, trace in rows:
        kind = _tts_failure_of(json.loads(trace))
        if kind is not None:
            await conn.execute("UPDATE decisions SET tts_failure = ? WHERE id = ?",
                               (kind, decision_id))


def _tts_failure_of(stages: list[dict]) -> str | None:
    """The kind of a failed spoken reply in a stored trace (m012's backfill): the reason that
    ``bot.chat.voice_reply`` wrote first in a failed ``text_to_speech`` stage's detail
    (``timeout: ReadTimeout after 10 s``), or ``encode`` for a failed ``encode_voice``."""
    for stage in stages:
        if stage.get("decision") != "failed":
            continue
        if stage.get("name") == "encode_voice":
            return "encode"
        if stage.get("name") == "text_to_speech":
            head = (stage.get("detail") or "").split(":", 1)[0]
            return head if re.fullmatch(r"[a-z_]+", head) else "other"
    return None
