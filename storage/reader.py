"""The decision log read-only, for the operator's dashboard (``bot.dashboard``) and its metrics.

One reader over both backends (:func:`storage.backend.open_read_only`): the bot's SQLite file
through a ``mode=ro`` URI with ``PRAGMA query_only`` (in WAL mode its reads never block the
bot's writes, nor wait for them), or the PostgreSQL database the replicas share, every statement
in a read-only transaction. It never writes and never migrates. Each query is written once;
where the dialects differ (JSON stored as text, the schema's listing) it goes through the
helpers of :mod:`storage.backend`, and rows are sorted here, not by the database's collation, so
both backends give the same rows in the same order.

Every decision records its front end in ``decisions.channel`` (migration ``m006_channels``);
``source = 'cli'`` shows as the command line. A database the bot has not migrated yet (the
reader never migrates) has no such column: there the channel is derived from what each row
records: a chat id that sent a WhatsApp message (``whatsapp_messages.chat_id``) is WhatsApp;
chat id 0 without a message id is the console; everything else is Telegram, the rule
``m006_channels`` applies when it adds the column.

    async with await DecisionReader.open(Path("data/bot.sqlite3")) as reader:  # or a URL
        page = await reader.decisions(DecisionFilter(status="refused-no-match"))
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from .backend import (
    SQLITE,
    Backend,
    DatabaseUrl,
    driver_errors,
    json_elements,
    json_field,
    open_read_only,
    parse_database_url,
    schema_columns,
)
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
_NO_REASON_SQL = "CASE WHEN d.status = 'answered' THEN 'none' ELSE 'unknown' END"


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
    """Read-only queries over the bot's database, SQLite or PostgreSQL. Build with
    ``await DecisionReader.open``; ``backend`` is the read-only :class:`Backend` it reads
    through, ``location`` where the database is (``location.display`` hides a password)."""

    def __init__(self, backend: Backend, columns: dict[str, set[str]]) -> None:
        self.backend, self.location = backend, backend.location
        dialect = backend.dialect
        decision_columns = columns["decisions"]
        self.has_inbox = "inbox" in columns
        self.has_whatsapp = "whatsapp_messages" in columns  # before m006
        derived = _DERIVED_CHANNEL if self.has_whatsapp else _DERIVED_CHANNEL_NO_WHATSAPP
        self.channel_sql = ("CASE WHEN d.source = 'cli' THEN 'cli' ELSE d.channel END"
                            if "channel" in decision_columns else derived)
        self.reason_sql = (  # before m004: not recorded
            f"COALESCE({json_field(dialect, 'd.reason', 'code')}, {_NO_REASON_SQL})"
            if "reason" in decision_columns else _NO_REASON_SQL)
        self.best_passage_sql = (  # before m009: not recorded
            "d.best_passage_id, d.best_passage_score" if "best_passage_id" in decision_columns
            else "NULL AS best_passage_id, NULL AS best_passage_score")
        self.tts_failure_sql = (  # before m012: read from the stage's text
            "d.tts_failure" if "tts_failure" in decision_columns else "NULL AS tts_failure")
        # each traced stage of each decision, as rows s (s.key: its place in the trace)
        self.stages_sql = f"decisions d, {json_elements(dialect, 'd.trace', 's')}"
        self.stage_sql = {key: json_field(dialect, "s.value", key)
                          for key in ("name", "decision", "detail", "elapsed_ms")}

    @classmethod
    async def open(cls, target: Path | str | DatabaseUrl) -> DecisionReader:
        """Open the database ``target`` names (a path or ``sqlite:///`` URL: the SQLite file;
        ``postgresql://...``: the database replicas share) for reading only.

        Raises:
            DatabaseOpenError: the SQLite file does not exist (it is never created), the
                database cannot be opened or reached, or it has no ``decisions`` table;
                ``detail`` says which, with the driver's message.
            ValueError: ``target`` is a URL of another scheme.
        """
        location = target if isinstance(target, DatabaseUrl) else parse_database_url(target)
        if location.dialect == SQLITE and not Path(location.path or "").is_file():
            raise DatabaseOpenError(location.display, "no such file (the bot creates it at its "
                                    "first start; BOT_DB_PATH or --db names another)")
        backend = await open_read_only(location)
        try:
            columns = await schema_columns(backend)
        except driver_errors() as exc:
            await backend.close()
            raise DatabaseOpenError(location.display, str(exc).strip()) from exc
        except BaseException:
            await backend.close()
            raise
        if "decisions" not in columns:
            await backend.close()
            raise DatabaseOpenError(location.display, "no decisions table: not the bot's "
                                    "database, or the bot has not started on it yet")
        return cls(backend, columns)

    async def close(self) -> None:
        await self.backend.close()

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
            "reason, COUNT(*) AS n FROM decisions d GROUP BY 1, 2, 3, 4", ())
        counts = [QuestionCount(r["channel"], r["lang"], r["status"], r["reason"], r["n"])
                  for r in rows]
        return sorted(counts, key=lambda c: (c.channel, c.lang, c.status, c.reason))

    async def refusals_per_day(self, days: int | None = None) -> list[RefusalCount]:
        """Refused decisions per UTC day, reason code and language; newest day first, then the
        most refused, then by reason and language. ``days`` keeps the last that many days that
        have decisions (None: all)."""
        rows = await self._all(
            f"SELECT substr(d.created_at, 1, 10) AS day, {self.reason_sql} AS reason, d.lang, "
            "COUNT(*) AS n FROM decisions d WHERE d.status LIKE 'refused%' GROUP BY 1, 2, 3", ())
        counts = [RefusalCount(r["day"], r["reason"], r["lang"], r["n"]) for r in rows]
        counts.sort(key=lambda c: (c.reason, c.lang))
        counts.sort(key=lambda c: (c.day, c.n), reverse=True)
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
            f"SELECT {self.stage_sql['name']} AS name, {self.stage_sql['elapsed_ms']} AS ms "
            f"FROM {self.stages_sql} WHERE d.id > ? {bound} ORDER BY d.id, s.key", params)
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
        stage = self.stage_sql
        rows = await self._all(
            f"SELECT d.id, d.created_at, {self.channel_sql} AS channel, d.reason, "
            f"{self.tts_failure_sql}, {stage['name']} AS stage, {stage['detail']} AS detail, "
            f"{stage['elapsed_ms']} AS ms "
            # a plain text match first (a superset) spares parsing every trace
            f"FROM {self.stages_sql} WHERE (d.trace LIKE '%\"error\"%' OR d.trace LIKE "
            f"'%\"failed\"%') AND {stage['name']} IN ({names}) AND "
            f"{stage['decision']} IN ('error', 'failed') ORDER BY d.id DESC, s.key"
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

    async def _all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return await self.backend.fetchall(sql, params)


def _row(r: Any) -> DecisionRow:
    return DecisionRow(
        id=r["id"], created_at=datetime.fromisoformat(r["created_at"]), channel=r["channel_"],
        chat_id=r["chat_id"], source=r["source"], lang=r["lang"], status=r["status"],
        top_score=r["top_score"], floor=r["floor"], is_low_confidence=bool(r["is_low_confidence"]),
        query=r["query"], answer=r["answer"], message=r["message"],
        reason_code=r["reason_code_"], total_ms=r["total_ms"], stt_ms=r["stt_ms"],
        reply_ms=r["reply_ms"])


def _speech_failure(r: Any) -> SpeechFailure:
    service = SPEECH_STAGES[r["stage"]]
    detail = r["detail"] or ""
    if service == "stt":
        reason = json.loads(r["reason"]) if r["reason"] else {}
        kind = reason.get("key") or "unknown"
    else:  # recorded as a field (m012; older rows backfilled by it)
        kind = r["tts_failure"] or "other"
    return SpeechFailure(r["id"], datetime.fromisoformat(r["created_at"]), r["channel"], service,
                         r["stage"], kind, detail, float(r["ms"] or 0.0))


def _refused(r: Any) -> RefusedQuestion:
    return RefusedQuestion(
        r["id"], datetime.fromisoformat(r["created_at"]), r["channel"], r["lang"], r["status"],
        r["reason"], r["query"], r["top_score"], r["floor"], r["best_passage_id"],
        r["best_passage_score"], r["message"])

