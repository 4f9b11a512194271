"""storage: schema pinned, migrations idempotent, decisions durable and rebuilt exactly.

Tests taking ``db`` run twice: on SQLite and on PostgreSQL (``db_target`` in tests/conftest.py;
the PostgreSQL case is ``slow`` and ``postgres``). Those taking ``sqlite_db`` or ``db_path``
check what only the SQLite file has (PRAGMAs, another process reading the file, old files).
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import UTC
from pathlib import Path

import aiosqlite
import pytest

from rag.types import (
    Citation,
    FallbackCode,
    FollowUpReading,
    Reason,
    ReasonCode,
    Result,
    Stage,
    Status,
    Trace,
    Turn,
)
from storage import ChatContext, ChatSettings, Database
from storage.backend import SqliteTx, driver_errors, open_backend
from storage.errors import DatabaseOpenError, DecisionNotFoundError, StorageError
from storage.inbox import Inbox, decision_of_sent
from storage.migrations import MIGRATIONS, apply_migrations, m005_whatsapp_messages
from storage.reader import DecisionReader

REPO_ROOT = Path(__file__).resolve().parent.parent
TG = "telegram"
"""The channel of most tests here."""

# The schema as migrations leave it: {table: {column: declared type}}. A new migration changes
# this on purpose; anything else changing it is a bug.
EXPECTED = {
    "_migrations": {"name": "TEXT", "applied_at": "TEXT"},
    "decisions": {
        "id": "INTEGER",
        "chat_id": "INTEGER",
        "message_id": "INTEGER",
        "user_id": "INTEGER",
        "created_at": "TEXT",
        "source": "TEXT",
        "transcript": "TEXT",
        "query": "TEXT",
        "lang": "TEXT",
        "status": "TEXT",
        "mode": "TEXT",
        "answer": "TEXT",
        "answer_lang": "TEXT",
        "message": "TEXT",
        "top_score": "REAL",
        "floor": "REAL",
        "is_low_confidence": "INTEGER",
        "citations": "TEXT",
        "trace": "TEXT",
        "total_ms": "REAL",
        "stt_ms": "REAL",
        "reply_ms": "REAL",
        "reason": "TEXT",
        "fallback": "TEXT",
        "channel": "TEXT",
        "searched": "TEXT",
        "best_passage_id": "TEXT",
        "best_passage_score": "REAL",
        "followup": "TEXT",
        "language_basis": "TEXT",
        "tts_failure": "TEXT",
        "cut": "TEXT",
    },
    "refusals": {
        "id": "INTEGER",
        "decision_id": "INTEGER",
        "chat_id": "INTEGER",
        "created_at": "TEXT",
        "status": "TEXT",
        "lang": "TEXT",
        "top_score": "REAL",
        "floor": "REAL",
        "reason": "TEXT",
        "code": "TEXT",
        "channel": "TEXT",
    },
    "chat_settings": {
        "channel": "TEXT",
        "chat_id": "INTEGER",
        "lang": "TEXT",
        "mode": "TEXT",
        "voice": "TEXT",
        "updated_at": "TEXT",
    },
    "inbox": {
        "id": "INTEGER",
        "channel": "TEXT",
        "message_key": "TEXT",
        "chat_id": "INTEGER",
        "payload": "TEXT",
        "received_at": "TEXT",
        "status": "TEXT",
        "decision_id": "INTEGER",
        "outcome": "TEXT",
        "done_at": "TEXT",
        "claimed_by": "TEXT",
        "lease_until_s": "REAL",
    },
    "sent_messages": {"channel": "TEXT", "chat_id": "INTEGER", "message_id": "INTEGER",
                      "decision_id": "INTEGER"},
    "rate_events": {"id": "INTEGER", "key": "TEXT", "at_s": "REAL"},
    "rate_limits": {"key": "TEXT", "told_at_s": "REAL", "refused_at_s": "REAL"},
    "repeats": {"chat": "TEXT", "question_key": "TEXT", "message_key": "TEXT", "at_s": "REAL",
                "n_repeats": "INTEGER"},
    "voice_cache": {"key": "TEXT", "location": "TEXT", "duration_s": "REAL",
                    "n_bytes": "INTEGER", "used_at_s": "REAL"},
    "chat_context": {"channel": "TEXT", "chat_id": "INTEGER", "question": "TEXT", "lang": "TEXT",
                     "passage_ids": "TEXT", "answer": "TEXT", "at_s": "REAL",
                     "n_followups": "INTEGER"},
    "web_exchanges": {"id": "INTEGER", "chat_id": "INTEGER", "message_key": "TEXT",
                      "question": "TEXT", "is_voice": "INTEGER", "view": "TEXT",
                      "is_done": "INTEGER", "voice_ogg": "BLOB", "voice_s": "REAL",
                      "upload": "BLOB", "created_at_s": "REAL", "updated_at_s": "REAL"},
}
PREVIOUS_VERSION_DB = REPO_ROOT / "tests" / "fixtures" / "bot-m005.sqlite3"
"""A database written by the previous version (main before issue #23: migrations m001-m005)
through its own API: Telegram chat 42 (2 decisions, settings, 2 sent messages, 3 inbox updates:
done, sending, pending), WhatsApp number 919800000001 (1 decision, settings, 2 claimed messages:
done, pending), the console (chat 0: 1 decision, settings)."""


def answered_result(query: str = "what is the capital of gujarat") -> Result:
    trace = Trace()
    trace.add("input_guard", "ok", "31 chars", 0.042)
    trace.add("language", "en", "script: latin", 0.011)
    trace.add("search", "ok", "top 0.912 en-1102432-5", 8.314)
    trace.add("relevance_guard", "passed", "top 0.912 >= floor 0.840 (en)", 0.005)
    trace.add("answer", "extractive", "1 sentence", 1.207)
    return Result(
        status=Status.ANSWERED,
        query=query,
        lang="en",
        answer="Gandhinagar is the capital of Gujarat.",
        answer_lang="en",
        citations=[
            Citation("en-1102432-5", "en", 0.912, "Gandhinagar is the capital of Gujarat."),
            Citation("en-1102432-2", "en", 0.871, "Ahmedabad is the largest city."),
        ],
        top_score=0.912,
        floor=0.84,
        is_low_confidence=False,
        mode="extractive",
        trace=trace,
    )


def refused_result(query: str = "भारत की राजधानी क्या है", lang: str = "hi") -> Result:
    trace = Trace()
    trace.add("search", "ok", "top 0.779", 7.5)
    trace.add("relevance_guard", "refused", "top 0.779 < floor 0.850 (hi)", 0.004)
    return Result(
        status=Status.REFUSED_NO_MATCH,
        query=query,
        lang=lang,
        top_score=0.779,
        floor=0.85,
        message="top 0.779 < floor 0.850 (hi)",
        trace=trace,
        reason=Reason(ReasonCode.BELOW_FLOOR, "top 0.779 < floor 0.850 (hi)", score=0.779,
                      floor=0.85, lang="hi"),
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "bot.sqlite3"


@pytest.fixture
async def db(db_target):
    async with await Database.open(db_target) as database:
        yield database


@pytest.fixture
async def sqlite_db(db_path: Path):
    async with await Database.open(db_path) as database:
        yield database


# PostgreSQL's column types as the SQLite schema declares them (storage.backend.sql_types)
_PG_TYPES = {"bigint": "INTEGER", "double precision": "REAL", "text": "TEXT",
             "bytea": "BLOB"}


async def schema_of(db: Database) -> dict[str, dict[str, str]]:
    """{table: {column: declared type}} of either backend, in SQLite's words."""
    if db.dialect == "sqlite":
        return schema(db.path)
    rows = await db._fetchall(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position", ())
    tables: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        tables.setdefault(table, {})[column] = _PG_TYPES.get(data_type, data_type)
    return tables


def schema(path: Path) -> dict[str, dict[str, str]]:
    with sqlite3.connect(path) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {
            t: {row[1]: row[2] for row in conn.execute(f"PRAGMA table_info({t})")} for t in tables
        }


async def test_schema_matches_pinned_columns(db):
    assert await schema_of(db) == EXPECTED


async def test_processes_opening_together_apply_each_migration_once(db_target):
    if isinstance(db_target, Path):
        db_target.parent.mkdir(parents=True)
    dbs = await asyncio.gather(*(Database.open(db_target) for _ in range(4)))
    try:
        rows = await dbs[0]._fetchall("SELECT name FROM _migrations ORDER BY name", ())
        assert [r[0] for r in rows] == [fn.__name__ for fn in MIGRATIONS]
        assert await schema_of(dbs[0]) == EXPECTED
    finally:
        for db in dbs:
            await db.close()


async def test_migrations_are_recorded_once_and_reapplying_is_a_noop(db_path):
    async with await Database.open(db_path):
        pass
    with sqlite3.connect(db_path) as conn:
        first = conn.execute("SELECT name, applied_at FROM _migrations ORDER BY name").fetchall()
    assert [name for name, _ in first] == [fn.__name__ for fn in MIGRATIONS]
    assert first[0][0] == "m001_create_tables"

    async with await Database.open(db_path):
        pass
    async with aiosqlite.connect(db_path, isolation_level=None) as conn:
        assert await apply_migrations(conn) == []
    with sqlite3.connect(db_path) as conn:
        again = conn.execute("SELECT name, applied_at FROM _migrations ORDER BY name").fetchall()
    assert again == first
    assert schema(db_path) == EXPECTED


async def test_a_folder_or_an_unmigratable_file_is_a_database_open_error_naming_it(tmp_path):
    with pytest.raises(DatabaseOpenError, match="cannot open the database") as err:
        await Database.open(tmp_path)  # a folder
    assert err.value.path == tmp_path and isinstance(err.value, StorageError)
    clashing = tmp_path / "clash.sqlite3"  # a table m001 creates, made by something else
    with sqlite3.connect(clashing) as conn:
        conn.execute("CREATE TABLE decisions (x INTEGER)")
    with pytest.raises(DatabaseOpenError, match="decisions already exists") as err:
        await Database.open(clashing)
    assert err.value.path == clashing and isinstance(err.value.__cause__, sqlite3.Error)


async def test_failing_migration_is_rolled_back_and_not_recorded(db_target):
    async def m001_ok(conn):
        await conn.execute("CREATE TABLE kept (x INTEGER)")

    async def m002_breaks(conn):
        await conn.execute("CREATE TABLE half_done (x INTEGER)")
        await conn.execute("INSERT INTO no_such_table VALUES (1)")

    backend = await open_backend(db_target)
    try:
        with pytest.raises(driver_errors(), match="no_such_table"):
            await apply_migrations(backend, [m001_ok, m002_breaks])
        assert await backend.fetchone("SELECT * FROM kept") is None  # exists, empty
        with pytest.raises(driver_errors(), match="half_done"):
            await backend.fetchone("SELECT * FROM half_done")
        rows = await backend.fetchall("SELECT name FROM _migrations")
        assert [r[0] for r in rows] == ["m001_ok"]
    finally:
        await backend.close()


async def test_open_sets_wal_foreign_keys_and_busy_timeout(sqlite_db, db_path):
    db = sqlite_db
    async with db._conn.execute("PRAGMA journal_mode") as cur:
        assert (await cur.fetchone())[0] == "wal"
    async with db._conn.execute("PRAGMA foreign_keys") as cur:
        assert (await cur.fetchone())[0] == 1
    async with db._conn.execute("PRAGMA busy_timeout") as cur:
        assert (await cur.fetchone())[0] == 5000
    # WAL is a property of the file: a fresh connection sees it too.
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_decision_round_trip_rebuilds_result_trace_and_citations(db):
    result = answered_result("ગુજરાતની રાજધાની કઈ છે")
    result.lang, result.answer_lang, result.is_low_confidence = "gu", "gu", True
    decision_id = await db.record_decision(
        TG, chat_id=42, message_id=7, user_id=1001, source="voice", result=result,
        transcript="ગુજરાતની રાજધાની કઈ છે?", stt_ms=812.5,
    )

    stored = await db.last_decision(TG, 42)

    assert stored.id == decision_id
    assert stored.result == result
    assert stored.result.trace.get("relevance_guard").detail == "top 0.912 >= floor 0.840 (en)"
    assert stored.result.citations[1] == Citation(
        "en-1102432-2", "en", 0.871, "Ahmedabad is the largest city."
    )
    assert (stored.chat_id, stored.message_id, stored.user_id) == (42, 7, 1001)
    assert (stored.source, stored.transcript) == ("voice", "ગુજરાતની રાજધાની કઈ છે?")
    assert stored.total_ms == pytest.approx(result.trace.total_ms)
    assert (stored.stt_ms, stored.reply_ms) == (812.5, None)
    assert stored.created_at.tzinfo == UTC


async def test_lone_surrogates_in_any_text_are_stored_as_replacement_characters(db):
    result = refused_result(query="Xbox 360 cost? \ud800")
    result.message = "no match for \udfff"
    result.trace.add("speech_to_text", "hi-IN\ud800", "14 chars", 3.0)
    result.citations = [Citation("en-1", "en", 0.5, "excerpt \udc80")]

    await db.record_decision(TG, 9, 1, 2, "voice", result, transcript="Xbox 360 cost? \ud800")

    stored = await db.last_decision(TG, 9)
    [refusal] = await db.refusals(TG, 9)
    assert stored.transcript == stored.result.query == "Xbox 360 cost? \ufffd"
    assert stored.result.message == refusal.reason == "no match for \ufffd"
    assert stored.result.trace.get("speech_to_text").decision == "hi-IN\ufffd"
    assert stored.result.citations[0].excerpt == "excerpt \ufffd"


async def test_set_reply_ms_updates_the_decision_and_rejects_unknown_ids(db):
    decision_id = await db.record_decision(TG, 1, 2, 3, "text", answered_result())
    await db.set_reply_ms(decision_id, 153.25)
    assert (await db.last_decision(TG, 1)).reply_ms == 153.25
    with pytest.raises(DecisionNotFoundError, match="999") as err:
        await db.set_reply_ms(999, 1.0)
    assert err.value.decision_id == 999 and isinstance(err.value, LookupError)


async def test_refused_decision_is_logged_as_refusal(db):
    decision_id = await db.record_decision(TG, 5, 10, 20, "text", refused_result())

    [refusal] = await db.refusals()

    assert refusal.decision_id == decision_id
    assert refusal.chat_id == 5
    assert refusal.status is Status.REFUSED_NO_MATCH
    assert (refusal.lang, refusal.top_score, refusal.floor) == ("hi", 0.779, 0.85)
    assert refusal.reason == "top 0.779 < floor 0.850 (hi)"
    assert refusal.created_at == (await db.last_decision(TG, 5)).created_at


async def test_a_refusals_best_passage_is_stored_in_columns_the_dashboard_reads(
        sqlite_db, db_path):
    """The closest passage of a refused question (no citation) is a typed field of the
    decision, not words parsed back from the trace."""
    result = refused_result()
    result.best_passage_id, result.best_passage_score = "hi-1102432-0", 0.779
    result.trace.add("search", "5 hits", "wording that no reader depends on", 2.0)
    decision_id = await sqlite_db.record_decision(TG, 5, 10, 20, "text", result)

    stored = await sqlite_db.last_decision(TG, 5)
    reader = await DecisionReader.open(db_path)
    try:
        [listed] = await reader.refused_questions()
    finally:
        await reader.close()
    assert (stored.result.best_passage_id, stored.result.best_passage_score) == (
        "hi-1102432-0", 0.779)
    assert (listed.decision_id, listed.best_passage_id, listed.best_score) == (
        decision_id, "hi-1102432-0", 0.779)


async def test_answered_and_error_decisions_are_not_logged_as_refusals(db):
    await db.record_decision(TG, 5, 1, 20, "text", answered_result())
    await db.record_decision(TG, 5, 2, 20, "cli", Result(Status.ERROR, "q", "en", message="boom"))
    for status in (Status.REFUSED_BAD_INPUT, Status.REFUSED_UNGROUNDED):
        await db.record_decision(TG, 5, 3, 20, "text",
                                 Result(status, "q", "en", message=status.value))

    refusals = await db.refusals()

    assert await db.count_decisions() == 4
    assert [r.status for r in refusals] == [Status.REFUSED_UNGROUNDED, Status.REFUSED_BAD_INPUT]


async def test_refusal_and_decision_commit_together_or_not_at_all(db):
    # Make the refusal insert fail from outside: the decision must not be left behind.
    async with db.backend.transaction() as tx:
        if db.dialect == "sqlite":
            await tx.execute("CREATE TRIGGER no_refusals BEFORE INSERT ON refusals "
                             "BEGIN SELECT RAISE(ABORT, 'refusals closed'); END")
        else:
            await tx.execute("CREATE FUNCTION no_refusals() RETURNS trigger LANGUAGE plpgsql AS "
                             "$$ BEGIN RAISE EXCEPTION 'refusals closed'; END $$")
            await tx.execute("CREATE TRIGGER no_refusals BEFORE INSERT ON refusals "
                             "FOR EACH ROW EXECUTE FUNCTION no_refusals()")
    with pytest.raises(driver_errors(), match="refusals closed"):
        await db.record_decision(TG, 5, 10, 20, "text", refused_result())

    assert await db.count_decisions() == 0
    assert await db.last_decision(TG, 5) is None
    # The connection is usable afterwards (the failed transaction was rolled back).
    await db.record_decision(TG, 5, 11, 20, "text", answered_result())
    assert await db.count_decisions() == 1


async def test_refusals_filter_by_chat_newest_first_with_limit(db):
    for i in range(3):
        await db.record_decision(TG, 1, i, 9, "text", refused_result(f"q1-{i}"))
    await db.record_decision(TG, 2, 0, 9, "text", refused_result("q2"))

    chat_one = await db.refusals(TG, chat_id=1)
    assert [r.chat_id for r in chat_one] == [1, 1, 1]
    decision_ids = [r.decision_id for r in chat_one]
    assert decision_ids == sorted(decision_ids, reverse=True)
    assert [r.chat_id for r in await db.refusals(limit=2)] == [2, 1]
    with pytest.raises(ValueError, match="limit"):
        await db.refusals(limit=0)


async def test_last_decision_is_per_chat(db):
    await db.record_decision(TG, 1, 1, 9, "text", answered_result("first in chat 1"))
    await db.record_decision(TG, 2, 1, 9, "text", answered_result("only in chat 2"))
    await db.record_decision(TG, 1, 2, 9, "text", refused_result("second in chat 1"))

    assert (await db.last_decision(TG, 1)).result.query == "second in chat 1"
    assert (await db.last_decision(TG, 2)).result.query == "only in chat 2"
    assert await db.last_decision(TG, 3) is None


async def test_unknown_source_is_rejected_and_nothing_written(db):
    with pytest.raises(ValueError, match="'fax'"):
        await db.record_decision(TG, 1, 1, 1, "fax", answered_result())
    assert await db.count_decisions() == 0


async def test_concurrent_records_are_all_committed(db):
    ids = await asyncio.gather(
        *(db.record_decision(TG, i % 3, i, 9, "text", refused_result(f"q{i}")) for i in range(20))
    )
    assert len(set(ids)) == 20
    assert await db.count_decisions() == 20
    assert len(await db.refusals(limit=100)) == 20


async def test_data_survives_close_and_reopen(db_target):
    async with await Database.open(db_target) as db:
        await db.record_decision(TG, 8, 1, 9, "voice", refused_result(), transcript="raw")
        await db.set_chat_settings(TG, 8, lang="te")
    async with await Database.open(db_target) as db:
        assert (await db.last_decision(TG, 8)).result == refused_result()
        assert len(await db.refusals(TG, chat_id=8)) == 1
        assert (await db.get_chat_settings(TG, 8)).lang == "te"


async def test_committed_decision_is_visible_to_another_connection_while_writer_open(
    sqlite_db, db_path
):
    decision_id = await sqlite_db.record_decision(TG, 3, 4, 5, "text", refused_result())

    with sqlite3.connect(db_path) as reader:
        row = reader.execute(
            "SELECT chat_id, query, status FROM decisions WHERE id = ?", (decision_id,)
        ).fetchone()
        n_refusals = reader.execute("SELECT COUNT(*) FROM refusals").fetchone()[0]

    assert row == (3, "भारत की राजधानी क्या है", "refused-no-match")
    assert n_refusals == 1


def test_decision_survives_a_killed_process(db_path):
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from pathlib import Path
        from rag.types import Result, Status
        from storage import Database

        async def main():
            db = await Database.open(Path({str(db_path)!r}))
            result = Result(Status.ANSWERED, "q", "en", "a")
            await db.record_decision("telegram", 77, 1, 2, "cli", result)
            os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint

        asyncio.run(main())
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()

    with sqlite3.connect(db_path) as reader:
        rows = reader.execute("SELECT chat_id, answer FROM decisions").fetchall()
    assert rows == [(77, "a")]


async def test_chat_settings_default_then_update_one_field_at_a_time(db):
    assert await db.get_chat_settings(TG, 11) == ChatSettings(TG, 11, "auto", "extractive", None)

    after_lang = await db.set_chat_settings(TG, 11, lang="hi")
    assert (after_lang.lang, after_lang.mode) == ("hi", "extractive")
    assert after_lang.updated_at.tzinfo == UTC

    after_mode = await db.set_chat_settings(TG, 11, mode="generative")
    assert (after_mode.lang, after_mode.mode) == ("hi", "generative")
    assert await db.get_chat_settings(TG, 11) == after_mode
    assert await db.get_chat_settings(TG, 12) == ChatSettings(TG, 12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"lang": "fr"}, "language 'fr'"), ({"mode": "creative"}, "mode 'creative'"),
     ({"voice": "loud"}, "voice 'loud'")],
)
async def test_chat_settings_reject_unknown_values_and_keep_old_ones(db, kwargs, match):
    await db.set_chat_settings(TG, 11, lang="gu", mode="generative")
    with pytest.raises(ValueError, match=match):
        await db.set_chat_settings(TG, 11, **kwargs)
    stored = await db.get_chat_settings(TG, 11)
    assert (stored.lang, stored.mode) == ("gu", "generative")


async def test_voice_setting_defaults_to_auto_and_changes_alone(db):
    assert (await db.get_chat_settings(TG, 11)).voice == "auto"
    await db.set_chat_settings(TG, 11, lang="hi")
    after = await db.set_chat_settings(TG, 11, voice="off")
    assert (after.lang, after.mode, after.voice) == ("hi", "extractive", "off")
    assert (await db.set_chat_settings(TG, 11, mode="generative")).voice == "off"


async def test_m003_gives_existing_chats_voice_auto(db_path):
    older = [fn for fn in MIGRATIONS if fn.__name__ < "m003"]
    db_path.parent.mkdir(parents=True)
    async with aiosqlite.connect(db_path, isolation_level=None) as conn:
        await apply_migrations(conn, older)
        await conn.execute("INSERT INTO chat_settings (chat_id, lang, mode, updated_at) "
                           "VALUES (5, 'te', 'generative', '2026-01-01T00:00:00+00:00')")
    async with await Database.open(db_path) as db:
        stored = await db.get_chat_settings(TG, 5)
    assert (stored.lang, stored.mode, stored.voice) == ("te", "generative", "auto")
    assert [fn.__name__ for fn in MIGRATIONS] == sorted(fn.__name__ for fn in MIGRATIONS)


async def test_stages_added_after_the_reply_show_in_the_stored_trace(db):
    decision_id = await db.record_decision(TG, 3, 1, 2, "voice", answered_result())
    before = await db.last_decision(TG, 3)
    await db.add_stages(decision_id, [Stage("text_to_speech", "failed", "timeout after 10 s",
                                            10012.5)])
    after = await db.last_decision(TG, 3)
    assert after.result.trace.stages == [*before.result.trace.stages,
                                         Stage("text_to_speech", "failed", "timeout after 10 s",
                                               10012.5)]
    assert after.total_ms == before.total_ms
    with pytest.raises(LookupError):
        await db.add_stages(decision_id + 1, [])


async def test_typed_reason_and_fallback_are_stored_and_read_back(db):
    refused = refused_result()
    refused_id = await db.record_decision(TG, 7, 1, 2, "text", refused)
    answered = answered_result()
    answered.fallback = FallbackCode.RATE_LIMITED
    await db.record_decision(TG, 8, 1, 2, "text", answered)

    assert (await db.last_decision(TG, 7)).result.reason == refused.reason
    assert (await db.last_decision(TG, 8)).result.fallback is FallbackCode.RATE_LIMITED
    [(code,)] = await db._fetchall("SELECT code FROM refusals WHERE decision_id = ?",
                                   (refused_id,))
    assert code == "below_floor"


async def test_decisions_stored_before_m004_are_read_without_a_reason(db_path):
    older = [fn for fn in MIGRATIONS if fn.__name__ < "m004"]
    db_path.parent.mkdir(parents=True)
    async with aiosqlite.connect(db_path, isolation_level=None) as conn:
        await apply_migrations(conn, older)
        await conn.execute(
            "INSERT INTO decisions (chat_id, created_at, source, query, lang, status, mode, "
            "answer, answer_lang, message, top_score, floor, is_low_confidence, citations, "
            "trace, total_ms) VALUES (4, '2026-01-01T00:00:00+00:00', 'text', 'q', 'en', "
            "'refused-no-match', 'extractive', '', '', 'top 0.700 < floor 0.840 (en)', 0.7, "
            "0.84, 0, '[]', '[]', 1.0)")
    async with await Database.open(db_path) as db:
        stored = await db.last_decision(TG, 4)
    assert stored.result.reason is None and stored.result.fallback is None
    assert (stored.result.status, stored.result.top_score) == (Status.REFUSED_NO_MATCH, 0.7)


async def test_m005_keeps_a_whatsapp_table_the_front_end_created_itself(db_path):
    # before m005 the WhatsApp front end ran CREATE TABLE IF NOT EXISTS on start-up
    older = [fn for fn in MIGRATIONS if fn.__name__ < "m005"]
    db_path.parent.mkdir(parents=True)
    async with aiosqlite.connect(db_path, isolation_level=None) as conn:
        await apply_migrations(conn, older)
        await m005_whatsapp_messages(SqliteTx(conn))
        await conn.execute("INSERT INTO whatsapp_messages (message_id, chat_id, kind, "
                           "received_at) VALUES ('wamid.1', 919800000001, 'text', "
                           "'2026-01-01T00:00:00+00:00')")
    async with await Database.open(db_path) as db:
        inbox = Inbox(db)
        assert (await inbox.get("whatsapp", "wamid.1")).status == "pending"
        assert await inbox.claim("whatsapp", "wamid.2", 919800000001, "{}")
        assert not await inbox.claim("whatsapp", "wamid.2", 919800000001, "{}")
    assert schema(db_path) == EXPECTED


def count_rows(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}


async def test_m006_migrates_a_previous_version_database_without_losing_a_row(tmp_path):
    path = tmp_path / "bot.sqlite3"
    shutil.copyfile(PREVIOUS_VERSION_DB, path)
    before = count_rows(path)
    assert before["inbox"] == 3 and before["whatsapp_messages"] == 2

    async with await Database.open(path) as db:
        after = count_rows(path)
        for table in ("decisions", "refusals", "chat_settings", "sent_messages"):
            assert after[table] == before[table], table
        assert after["inbox"] == before["inbox"] + before["whatsapp_messages"]
        assert "whatsapp_messages" not in after

        # each chat keeps its rows, under the channel the dashboard used to derive for it
        assert (await db.get_chat_settings(TG, 42)).voice == "on"
        assert (await db.get_chat_settings("whatsapp", 919800000001)).mode == "generative"
        assert (await db.get_chat_settings("console", 0)).lang == "te"
        assert (await db.get_chat_settings(TG, 919800000001)).updated_at is None
        assert (await db.last_decision(TG, 42)).result.query == "what is z"
        assert (await db.last_decision("whatsapp", 919800000001)).source == "voice"
        assert (await db.last_decision("console", 0)).channel == "console"
        assert [r.channel for r in await db.refusals()] == ["whatsapp", "telegram"]
        assert (await decision_of_sent(db, "telegram", 42, 101)).result.answer == "X is y."

        # the inbox states carry over: a sent reply is never sent again, pending is replayed
        inbox = Inbox(db)
        assert [(i.message_key, i.status) for i in await inbox.unfinished("telegram")] == [
            ("42/11/0", "sending"), ("42/12/0", "pending")]
        assert [(i.message_key, i.status) for i in await inbox.unfinished("whatsapp")] == [
            ("wamid.B", "pending")]
        done = await inbox.get("whatsapp", "wamid.A")
        assert (done.status, done.outcome, done.chat_id) == ("done", "replied n=1",
                                                             919800000001)
        assert not await inbox.claim("telegram", "42/10/0", 42, "{}")
    assert schema(path) == EXPECTED


async def test_a_whatsapp_chat_and_a_telegram_chat_with_one_id_share_nothing(db):
    await db.set_chat_settings(TG, 5, lang="hi")
    await db.record_decision(TG, 5, 1, 5, "text", answered_result())
    await db.record_decision("whatsapp", 5, None, 5, "text", refused_result())

    assert (await db.get_chat_settings("whatsapp", 5)).lang == "auto"
    assert (await db.last_decision(TG, 5)).result.status is Status.ANSWERED
    assert (await db.last_decision("whatsapp", 5)).result.status is Status.REFUSED_NO_MATCH
    assert await db.refusals(TG, 5) == []
    assert [r.channel for r in await db.refusals("whatsapp", 5)] == ["whatsapp"]
    with pytest.raises(ValueError, match="needs its channel"):
        await db.refusals(chat_id=5)
    with pytest.raises(ValueError, match="channel"):
        await db.set_chat_settings("", 5, lang="en")


async def test_inbox_goes_pending_sending_done_once_per_channel_and_key(db):
    inbox = Inbox(db)
    assert await inbox.claim("whatsapp", "wamid.1", 5, '{"id": "wamid.1"}')
    assert not await inbox.claim("whatsapp", "wamid.1", 5, "{}")
    assert await inbox.claim("telegram", "wamid.1", 5, "{}")  # another channel's key space
    assert await inbox.mark_sending("whatsapp", "wamid.1")
    assert not await inbox.mark_sending("whatsapp", "wamid.1")
    assert [i.status for i in await inbox.unfinished("whatsapp")] == ["sending"]
    assert await inbox.finish("whatsapp", "wamid.1", "replied n=1", decision_id=None)
    assert not await inbox.finish("whatsapp", "wamid.1", "again")
    item = await inbox.get("whatsapp", "wamid.1")
    assert (item.status, item.outcome, item.payload) == ("done", "replied n=1",
                                                         '{"id": "wamid.1"}')
    assert await inbox.unfinished("whatsapp") == []
    assert [i.channel for i in await inbox.unfinished("telegram")] == ["telegram"]


# ---------------------------------------------------------- conversation context (issue 44)


async def test_a_chats_context_is_stored_replaced_and_cleared_per_channel_and_chat(db):
    assert await db.get_chat_context(TG, 5) is None
    first = ChatContext(TG, 5, "calories small cucumber", "en", ("en-59804-2", "en-59804-0"),
                        "A small cucumber has 16 calories.", 1_764_547_200.25)
    await db.set_chat_context(first)
    assert await db.get_chat_context(TG, 5) == first
    assert first.turn == Turn("calories small cucumber", "en", ("en-59804-2", "en-59804-0"),
                              "A small cucumber has 16 calories.")
    assert await db.get_chat_context("whatsapp", 5) is None  # another channel's chat 5
    assert await db.get_chat_context(TG, 6) is None

    refused = ChatContext(TG, 5, "और हिंदी में \ud800", "hi", (), "", 1_764_547_260.0,
                          n_followups=2)
    await db.set_chat_context(refused)  # replaces the first: one context per chat
    stored = await db.get_chat_context(TG, 5)
    assert stored == replace(refused, question="और हिंदी में \ufffd")
    assert (stored.passage_ids, stored.answer, stored.n_followups) == ((), "", 2)

    assert await db.clear_chat_context(TG, 5) is True
    assert await db.get_chat_context(TG, 5) is None
    assert await db.clear_chat_context(TG, 5) is False


async def test_a_context_with_no_channel_or_a_negative_count_is_refused_and_not_written(db):
    with pytest.raises(ValueError, match="channel"):
        await db.set_chat_context(ChatContext("", 5, "q", "en", (), "", 0.0))
    with pytest.raises(ValueError, match="n_followups must be >= 0, got -1"):
        await db.set_chat_context(ChatContext(TG, 5, "q", "en", (), "", 0.0, n_followups=-1))
    assert await db.get_chat_context(TG, 5) is None


async def test_a_decisions_followup_reading_is_stored_and_read_back(db):
    result = answered_result("and a big one?")
    result.searched = "calories small cucumber big one"
    result.followup = FollowUpReading(True, "calories small cucumber big one",
                                      "follow-up: 4 words, marker 'and'")
    await db.record_decision(TG, 42, 7, 1001, "text", result)
    assert (await db.last_decision(TG, 42)).result == result

    alone = answered_result()
    alone.followup = FollowUpReading(False, detail="alone: 9 words > 6")
    await db.record_decision(TG, 42, 8, 1001, "text", alone)
    assert (await db.last_decision(TG, 42)).result.followup == alone.followup

    await db.record_decision(TG, 42, 9, 1001, "text", answered_result())  # no context given
    assert (await db.last_decision(TG, 42)).result.followup is None
