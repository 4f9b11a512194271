"""The decision log read-only, for the operator's dashboard (``bot.dashboard``) and its metrics.

Opens the bot's SQLite file with a ``mode=ro`` URI and ``PRAGMA query_only``: it never writes,
never migrates, and in WAL mode its reads never block the bot's writes (nor wait for them).

Every decision records its front end in ``decisions.channel`` (migration ``m006_channels``);
``source = 'cli'`` shows as the command line. A database the bot has not migrated yet (the
reader never migrates) has no such column: there the channel is derived from what each row
records: a chat id that sent a WhatsApp message (``whatsapp_messages.chat_id``) is WhatsApp;
chat id 0 without a message id is the console; everything else is Telegram, the rule
``m006_channels`` applies when it adds the column.

    async with await DecisionReader.open(Path("data/bot.sqlite3")) as reader:
        page = await reader.decisions(DecisionFilter(status="refused-no-match"))
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite

from .db import StoredDecision, _decision_from_row
from .errors import DatabaseOpenError

CHANNELS: tuple[str, ...] = ("telegram", "whatsapp", "web", "console", "cli")
"""Front ends a decision can come from (see the module docstring for how each is told)."""

SPEECH_STAGES: dict[str, str] = {
    "speech_to_text": "stt", "text_to_speech": "tts", "encode_voice": "tts"}
"""Trace stages of the speech services, and which service each belongs to. A failed stage has
decision ``error`` (speech-to-text: ``Trace.timed`` saw the exception) or ``failed`` (the spoken
reply: ``bot.chat.voice_reply.make_voice``)."""

_DERIVED_CHANNEL = """CASE
    WHEN d.source = 'cli' THEN 'cli'
    WHEN d.chat_id IN (SELECT chat_id FROM whatsapp_messages) THEN 'whatsapp'
    WHEN d.chat_id = 0 AND d.message_id IS NULL THEN 'console'
    ELSE 'telegram' END"""
_DERIVED_CHANNEL_NO_WHATSAPP = """CASE
    WHEN d.source = 'cli' THEN 'cli'
    WHEN d.chat_id = 0 AND d.message_id IS NULL THEN 'console'
    ELSE 'telegram' END"""
_REASON_SQL = ("COALESCE(json_extract(d.reason, '$.code'), "
               "CASE WHEN d.status = 'answered' THEN 'none' ELSE 'unknown' END)")


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """Which decisions to list. None means any. ``status`` a ``rag.types.Status`` value,
    ``lang`` one of ``rag.types.LANGUAGES``, ``channel`` one of :data:`CHANNELS`, ``source``
    one of ``storage.db.SOURCES``; ``date_from``/``date_to`` are UTC days, both inclusive.
    ``page`` is 1-based, ``per`` rows per page."""

    status: str | None = None
    lang: str | None = None
    channel: str | None = None
    source: str | None = None
    date_from: date | None = None
    date_to: date | None = None
    page: int = 1
    per: int = 50


@dataclass(frozen=True, slots=True)
class DecisionRow:
    """One decision as the questions list shows it. ``reason_code`` is the refusal's or error's
    ``ReasonCode`` value (``hedged`` for a hedged answer), ``none`` when answered, ``unknown``
    for rows stored before reasons
    were (migration m004). Times in milliseconds; ``created_at`` timezone-aware UTC."""

    id: int
    created_at: datetime
    channel: str
    chat_id: int
    source: str
    lang: str
    status: str
    top_score: float | None
    floor: float | None
    is_low_confidence: bool
    query: str
    answer: str
    message: str
    reason_code: str
    total_ms: float
    stt_ms: float | None
    reply_ms: float | None

    @property
    def is_answered(self) -> bool:
        """A confident answer."""
        return self.status == "answered"

    @property
    def shows_answer(self) -> bool:
        """Answer text was shown: confident (``answered``) or ``hedged`` (issue 31)."""
        return self.status in ("answered", "hedged")


@dataclass(frozen=True, slots=True)
class DecisionPage:
    """One page of :class:`DecisionRow`, newest first, and how many rows match in all."""

    rows: list[DecisionRow]
    n_total: int
    page: int
    per: int

    @property
    def n_pages(self) -> int:
        return max(1, -(-self.n_total // self.per))


@dataclass(frozen=True, slots=True)
class QuestionCount:
    """How many decisions share a channel, language, status and reason code."""

    channel: str
    lang: str
    status: str
    reason: str
    n: int


@dataclass(frozen=True, slots=True)
class RefusalCount:
    """Refusals on one UTC ``day`` (ISO date) with one reason code and language."""

    day: str
    reason: str
    lang: str
    n: int


@dataclass(frozen=True, slots=True)
class SpeechFailure:
    """A failed speech-service stage: ``service`` ``stt`` or ``tts``, the trace ``stage``,
    ``kind`` (for speech-to-text the bot's message key, ``stt_down`` or ``stt_slow``; for
    text-to-speech the client's reason, e.g. ``timeout``, ``server_error``), its ``detail`` and
    ``elapsed_ms``."""

    decision_id: int
    created_at: datetime
    channel: str
    service: str
    stage: str
    kind: str
    detail: str
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class RefusedQuestion:
    """A refused question for the corpus to-do list: its best passage (the search's first hit and
    its cosine, stored with the decision: ``decisions.best_passage_id``; None when retrieval did
    not run or found nothing, and for decisions stored before migration m009) and scores."""

    decision_id: int
    created_at: datetime
    channel: str
    lang: str
    status: str
    reason: str
    query: str
    top_score: float | None
    floor: float | None
    best_passage_id: str | None
    best_score: float | None
    message: str


@dataclass(frozen=True, slots=True)
class InboxBacklog:
    """Messages received but not yet done, per channel and status (``pending``/``sending``)."""

    channel: str
    status: str
    n: int


class DecisionReader:
    """Read-only queries over the bot's database. Build with ``await DecisionReader.open``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path, tables: set[str],
                 decision_columns: set[str]) -> None:
        self._conn, self.path = conn, path
        self.has_inbox = "inbox" in tables
        self.has_whatsapp = "whatsapp_messages" in tables  # before m006
        derived = _DERIVED_CHANNEL if self.has_whatsapp else _DERIVED_CHANNEL_NO_WHATSAPP
        self.channel_sql = ("CASE WHEN d.source = 'cli' THEN 'cli' ELSE d.channel END"
                            if "channel" in decision_columns else derived)
        self.reason_sql = _REASON_SQL if "reason" in decision_columns else (
            "CASE WHEN d.status = 'answered' THEN 'none' ELSE 'unknown' END")
        self.best_passage_sql = (  # before m009: not recorded
            "d.best_passage_id, d.best_passage_score" if "best_passage_id" in decision_columns
            else "NULL AS best_passage_id, NULL AS best_passage_score")

    @classmethod
    async def open(cls, path: Path, busy_timeout_ms: int = 2000) -> DecisionReader:
        """Open ``path`` read-only (``mode=ro``). Raises :class:`DatabaseOpenError` when the
        file does not exist, is not a database, or has no ``decisions`` table."""
        path = Path(path)
        if not path.is_file():
            raise DatabaseOpenError(path, "no such file (the bot creates it at its first start; "
                                    "BOT_DB_PATH or --db names another)")
        # autocommit: no implicit BEGIN, so no read snapshot outlives its query
        conn = await aiosqlite.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                       isolation_level=None)
        try:
            conn.row_factory = aiosqlite.Row
            await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            await conn.execute("PRAGMA query_only = ON")
            async with conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as cur:
                tables = {row[0] for row in await cur.fetchall()}
            if "decisions" not in tables:
                raise sqlite3.DatabaseError("no decisions table: not the bot's database")
            async with conn.execute("PRAGMA table_info(decisions)") as cur:
                columns = {row["name"] for row in await cur.fetchall()}
        except sqlite3.Error as exc:
            await conn.close()
            raise DatabaseOpenError(path, str(exc)) from exc
        return cls(conn, path, tables, columns)

    async def close(self) -> None:
        await self._conn.close()

    async def __aenter__(self) -> DecisionReader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def decisions(self, where: DecisionFilter) -> DecisionPage:
        """The decisions matching ``where``, newest first, one page of them."""
        sql_where, params = self._where(where)
        count = await self._all(f"SELECT COUNT(*) FROM decisions d {sql_where}", params)
        rows = await self._all(
            f"SELECT d.*, {self.channel_sql} AS channel_, {self.reason_sql} AS reason_code_ "
            f"FROM decisions d {sql_where} ORDER BY d.id DESC LIMIT ? OFFSET ?",
            (*params, where.per, (where.page - 1) * where.per))
        return DecisionPage([_row(r) for r in rows], count[0][0], where.page, where.per)

    async def decision(self, decision_id: int) -> tuple[DecisionRow, StoredDecision] | None:
        """One decision: its list row and the whole stored record (trace, citations), or None."""
        rows = await self._all(
            f"SELECT d.*, {self.channel_sql} AS channel_, {self.reason_sql} AS reason_code_ "
            "FROM decisions d WHERE d.id = ?", (decision_id,))
        return (_row(rows[0]), _decision_from_row(rows[0])) if rows else None

    async def question_counts(self) -> list[QuestionCount]:
        """Decisions counted by channel, language, status and reason code."""
        rows = await self._all(
            f"SELECT {self.channel_sql} AS channel, d.lang, d.status, {self.reason_sql} AS "
            "reason, COUNT(*) AS n FROM decisions d GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4", ())
        return [QuestionCount(r["channel"], r["lang"], r["status"], r["reason"], r["n"])
                for r in rows]

    async def refusals_per_day(self, days: int | None = None) -> list[RefusalCount]:
        """Refused decisions per UTC day, reason code and language; newest day first. ``days``
        keeps the last that many days that have decisions (None: all)."""
        rows = await self._all(
            f"SELECT substr(d.created_at, 1, 10) AS day, {self.reason_sql} AS reason, d.lang, "
            "COUNT(*) AS n FROM decisions d WHERE d.status LIKE 'refused%' "
            "GROUP BY 1, 2, 3 ORDER BY 1 DESC, 4 DESC, 2, 3", ())
        counts = [RefusalCount(r["day"], r["reason"], r["lang"], r["n"]) for r in rows]
        if days is not None:
            kept = sorted({c.day for c in counts}, reverse=True)[:days]
            counts = [c for c in counts if c.day in kept]
        return counts

    async def top_scores(self) -> tuple[dict[str, list[float]], dict[str, float]]:
        """Top-1 cosines of the decisions that ran retrieval, by language, and each language's
        floor as the most recent decision applied it."""
        rows = await self._all(
            "SELECT lang, top_score, floor FROM decisions d WHERE top_score IS NOT NULL "
            "ORDER BY id", ())
        scores: dict[str, list[float]] = defaultdict(list)
        floors: dict[str, float] = {}
        for r in rows:
            scores[r["lang"]].append(r["top_score"])
            if r["floor"] is not None:
                floors[r["lang"]] = r["floor"]
        return dict(scores), floors

    async def stage_timings(self, after_id: int = 0,
                            up_to_id: int | None = None) -> dict[str, list[float]]:
        """Milliseconds of every traced stage by stage name (in first-seen order), plus
        ``pipeline_total`` (the trace's total), ``stt_total`` and ``reply``, over the decisions
        with ``after_id`` < id <= ``up_to_id`` (None: no upper bound)."""
        bound, params = ("AND d.id <= ?", (after_id, up_to_id)) if up_to_id is not None \
            else ("", (after_id,))
        timings: dict[str, list[float]] = defaultdict(list)
        rows = await self._all(
            "SELECT json_extract(s.value, '$.name') AS name, "
            "json_extract(s.value, '$.elapsed_ms') AS ms FROM decisions d, json_each(d.trace) s "
            f"WHERE d.id > ? {bound} ORDER BY d.id, s.key", params)
        for r in rows:
            if r["ms"] is not None:
                timings[r["name"]].append(float(r["ms"]))
        for name, column in (("pipeline_total", "total_ms"), ("stt_total", "stt_ms"),
                             ("reply", "reply_ms")):
            rows = await self._all(
                f"SELECT {column} FROM decisions d WHERE {column} IS NOT NULL AND d.id > ? "
                f"{bound} ORDER BY id", params)
            if rows:
                timings[name] = [float(r[0]) for r in rows]
        return dict(timings)

    async def settled_id(self, age_s: float) -> int:
        """The highest decision id recorded at least ``age_s`` seconds ago (0 when none): rows
        that old no longer change (``add_stages`` and ``set_reply_ms`` follow the reply within
        seconds), so their timings can be kept instead of read again."""
        cutoff = (datetime.now(UTC) - timedelta(seconds=age_s)).isoformat(
            timespec="milliseconds")
        rows = await self._all("SELECT MAX(id) FROM decisions WHERE created_at < ?", (cutoff,))
        return rows[0][0] or 0

    async def speech_failures(self, limit: int | None = None) -> list[SpeechFailure]:
        """Failed speech-to-text and text-to-speech stages, newest first."""
        names = ", ".join(f"'{n}'" for n in SPEECH_STAGES)
        rows = await self._all(
            f"SELECT d.id, d.created_at, {self.channel_sql} AS channel, d.reason, "
            "json_extract(s.value, '$.name') AS stage, json_extract(s.value, '$.detail') AS "
            "detail, json_extract(s.value, '$.elapsed_ms') AS ms FROM decisions d, "
            # a plain text match first (a superset) spares parsing every trace
            "json_each(d.trace) s WHERE (d.trace LIKE '%\"error\"%' OR d.trace LIKE "
            f"'%\"failed\"%') AND json_extract(s.value, '$.name') IN ({names}) AND "
            "json_extract(s.value, '$.decision') IN ('error', 'failed') ORDER BY d.id DESC"
            + ("" if limit is None else f" LIMIT {int(limit)}"), ())
        return [_speech_failure(r) for r in rows]

    async def refused_questions(self) -> list[RefusedQuestion]:
        """Every refused decision, newest first, with its best passage and score."""
        rows = await self._all(
            f"SELECT d.id, d.created_at, {self.channel_sql} AS channel, d.lang, d.status, "
            f"{self.reason_sql} AS reason, d.query, d.top_score, d.floor, "
            f"{self.best_passage_sql}, d.message FROM decisions d "
            "WHERE d.status LIKE 'refused%' ORDER BY d.id DESC", ())
        return [_refused(r) for r in rows]

    async def inbox_backlog(self) -> list[InboxBacklog]:
        """Unfinished incoming messages by channel and status (zero rows are included)."""
        out = []
        if self.has_inbox and not self.has_whatsapp:  # m006: one inbox, every channel
            rows = await self._all("SELECT channel, status, COUNT(*) FROM inbox WHERE status "
                                   "<> 'done' GROUP BY channel, status", ())
            found = {(r[0], r[1]): r[2] for r in rows}
            channels = sorted({"telegram", "whatsapp"} | {c for c, _ in found})
            return [InboxBacklog(c, s, found.get((c, s), 0))
                    for c in channels for s in ("pending", "sending")]
        if self.has_inbox:
            rows = await self._all("SELECT status, COUNT(*) FROM inbox WHERE status != 'done' "
                                   "GROUP BY status", ())
            found = {r[0]: r[1] for r in rows}
            out += [InboxBacklog("telegram", s, found.get(s, 0)) for s in ("pending", "sending")]
        if self.has_whatsapp:
            rows = await self._all(
                "SELECT COUNT(*) FROM whatsapp_messages WHERE status = 'pending'", ())
            out.append(InboxBacklog("whatsapp", "pending", rows[0][0]))
        return out

    def _where(self, where: DecisionFilter) -> tuple[str, tuple[Any, ...]]:
        clauses, params = [], []
        for column, value in (("d.status", where.status), ("d.lang", where.lang),
                              ("d.source", where.source), (self.channel_sql, where.channel)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.date_from is not None:
            clauses.append("d.created_at >= ?")
            params.append(where.date_from.isoformat())
        if where.date_to is not None:
            clauses.append("d.created_at < ?")
            params.append((where.date_to + timedelta(days=1)).isoformat())
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", tuple(params)

    async def _all(self, sql: str, params: tuple[Any, ...]) -> list[aiosqlite.Row]:
        async with self._conn.execute(sql, params) as cursor:
            return list(await cursor.fetchall())


def _row(r: aiosqlite.Row) -> DecisionRow:
    return DecisionRow(
        id=r["id"], created_at=datetime.fromisoformat(r["created_at"]), channel=r["channel_"],
        chat_id=r["chat_id"], source=r["source"], lang=r["lang"], status=r["status"],
        top_score=r["top_score"], floor=r["floor"], is_low_confidence=bool(r["is_low_confidence"]),
        query=r["query"], answer=r["answer"], message=r["message"],
        reason_code=r["reason_code_"], total_ms=r["total_ms"], stt_ms=r["stt_ms"],
        reply_ms=r["reply_ms"])


def _speech_failure(r: aiosqlite.Row) -> SpeechFailure:
    service = SPEECH_STAGES[r["stage"]]
    detail = r["detail"] or ""
    if service == "stt":
        reason = json.loads(r["reason"]) if r["reason"] else {}
        kind = reason.get("key") or "unknown"
    else:  # bot.chat.voice_reply: "<ServiceError.reason>: <detail>"; encoding: the AudioError
        head = detail.split(":", 1)[0]
        kind = head if re.fullmatch(r"[a-z_]+", head) else "encode" if \
            r["stage"] == "encode_voice" else "other"
    return SpeechFailure(r["id"], datetime.fromisoformat(r["created_at"]), r["channel"], service,
                         r["stage"], kind, detail, float(r["ms"] or 0.0))


def _refused(r: aiosqlite.Row) -> RefusedQuestion:
    return RefusedQuestion(
        r["id"], datetime.fromisoformat(r["created_at"]), r["channel"], r["lang"], r["status"],
        r["reason"], r["query"], r["top_score"], r["floor"], r["best_passage_id"],
        r["best_passage_score"], r["message"])

