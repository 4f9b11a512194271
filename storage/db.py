"""Decisions, refusals, per-chat settings and each chat's conversation context (issue 44), in
one SQLite file (aiosqlite, the default) or a PostgreSQL database (psycopg 3), through
:mod:`storage.backend`.

Every question's ``Result`` (with its trace) is committed as soon as it is recorded, so a crash
loses nothing already answered; a refused decision gets its ``refusals`` row in the same
transaction. The SQLite file runs in WAL mode, so readers (``/why``, a script, ``sqlite3``) never
block the writer.

Every chat is keyed by ``(channel, chat_id)``: ``channel`` names the front end (``telegram``,
``whatsapp``, ``web``, ``console``: see :data:`CHANNELS`), so a WhatsApp number and a Telegram
chat with the same numeric id never share settings, decisions, context or ``/why``.

    async with await Database.open(Path("data/bot.sqlite3")) as db:
        decision_id = await db.record_decision("telegram", chat_id, message_id, user_id,
                                               "voice", result)
        stored = await db.last_decision("telegram", chat_id)
    # or Database.open("postgresql://bot@127.0.0.1/bot"): the same API, rows in PostgreSQL
"""

from __future__ import annotations

import json
import re
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from rag.types import (
    LANGUAGES,
    Citation,
    FallbackCode,
    FollowUpReading,
    LanguageBasis,
    QuestionCut,
    Reason,
    Result,
    Stage,
    Status,
    Trace,
    Turn,
)

from .backend import DEFAULT_BUSY_TIMEOUT_MS, Backend, Tx, driver_errors, open_backend
from .errors import DatabaseOpenError, DecisionNotFoundError
from .migrations import apply_migrations

CHANNELS: tuple[str, ...] = ("telegram", "whatsapp", "web", "console")
"""The front ends of today. Storage does not check ``channel`` against this list (a new front
end needs no migration); it must be non-empty."""
SOURCES: tuple[str, ...] = ("text", "voice", "cli")
"""Where a question came from: a typed message, a voice note, the command line."""
CHAT_LANGS: tuple[str, ...] = ("auto", *LANGUAGES)
"""Allowed ``ChatSettings.lang``: ``auto`` detects per question; a code forces that language."""
MODES: tuple[str, ...] = ("extractive", "generative")
"""Allowed ``ChatSettings.mode``."""
VOICE_MODES: tuple[str, ...] = ("auto", "on", "off")
"""Allowed ``ChatSettings.voice``: spoken replies for voice-note questions only, always, never."""

# Lone surrogates (from undecodable bytes or a service's "\ud800") cannot be encoded as UTF-8,
# so SQLite would refuse the whole row; they are stored as U+FFFD instead.
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class StoredDecision:
    """One recorded question: its rebuilt ``Result`` (trace included) and where it came from.

    ``total_ms`` is the trace's total (the pipeline); ``stt_ms`` the speech-to-text call (voice
    only); ``reply_ms`` the time to send the reply, set later by ``set_reply_ms``. All in
    milliseconds, None when not measured. ``created_at`` is timezone-aware UTC.
    """

    id: int
    channel: str
    chat_id: int
    message_id: int | None
    user_id: int | None
    source: str
    transcript: str | None
    result: Result
    total_ms: float
    stt_ms: float | None
    reply_ms: float | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredRefusal:
    """One refused decision, as logged. ``reason`` is the Result's ``message``."""

    id: int
    decision_id: int
    channel: str
    chat_id: int
    created_at: datetime
    status: Status
    lang: str
    top_score: float | None
    floor: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """Per-chat choices of the chat ``(channel, chat_id)``. ``lang`` is one of ``CHAT_LANGS``,
    ``mode`` one of ``MODES``, ``voice`` one of ``VOICE_MODES``; ``updated_at`` is None for a
    chat that never changed them (the defaults)."""

    channel: str
    chat_id: int
    lang: str = "auto"
    mode: str = "extractive"
    updated_at: datetime | None = None
    voice: str = "auto"


@dataclass(frozen=True, slots=True)
class ChatContext:
    """The conversation context of the chat ``(channel, chat_id)`` (issue 44): its last turn,
    which a follow-up ("and a large one?") is read with.

    ``question`` the last question as it was searched (``Result.searched or Result.query``),
    ``lang`` its language, ``passage_ids`` the passages its reply cited (best first; empty
    after a refusal), ``answer`` the answer text shown ("" after a refusal), ``at_s`` when it
    was answered (Unix seconds), ``n_followups`` how many follow-ups in a row it has carried
    (0: that question was read on its own). Whether it is still used (its age, its count) is
    decided by ``bot.chat.conversation``, not here.
    """

    channel: str
    chat_id: int
    question: str
    lang: str
    passage_ids: tuple[str, ...]
    answer: str
    at_s: float
    n_followups: int = 0

    @property
    def turn(self) -> Turn:
        """What the pipeline reads a follow-up with (``Pipeline.ask(..., after=turn)``)."""
        return Turn(self.question, self.lang, self.passage_ids, self.answer)


class Database:
    """The bot's store. Build with ``await Database.open(target)``; one instance per process.

    ``target`` is a path (SQLite, the default) or a URL (``BOT_DATABASE_URL``:
    ``sqlite:///data/bot.sqlite3`` or ``postgresql://user@host/db``); see
    :func:`storage.backend.parse_database_url`. ``backend`` is the open
    :class:`storage.backend.Backend`: the other stores (``storage.inbox``,
    ``storage.ratelimit``, ``storage.repeats``, ...) run their SQL through it. On SQLite writes
    are serialised by one lock so concurrent handlers never interleave transactions on the
    shared connection; on PostgreSQL each transaction has a pooled connection of its own.
    """

    def __init__(self, backend: Backend) -> None:
        """Use ``Database.open``; this only wraps an already open and migrated backend."""
        self.backend = backend
        self.dialect = backend.dialect
        self.path: Path | None = backend.location.path
        """The SQLite file; None on PostgreSQL."""

    @classmethod
    async def open(cls, target: Path | str,
                   busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Database:
        """Open (creating an SQLite file and its parent folder if needed) and migrate to the
        current schema (:func:`storage.migrations.apply_migrations`, once, under a lock).

        SQLite: WAL journal mode, ``synchronous=FULL`` (a commit survives power loss),
        ``foreign_keys=ON`` and ``busy_timeout`` (milliseconds). Raises
        :class:`DatabaseOpenError` (the driver's message in ``detail``) if the file is not a
        database, cannot be written, the server cannot be reached, or migrating fails;
        ValueError if ``target`` is a URL of another scheme.
        """
        backend = await open_backend(target, busy_timeout_ms=busy_timeout_ms)
        try:
            await apply_migrations(backend)
        except driver_errors() as exc:
            await backend.close()
            raise DatabaseOpenError(backend.location.path or backend.location.display,
                                    str(exc)) from exc
        except BaseException:
            await backend.close()
            raise
        return cls(backend)

    async def close(self) -> None:
        await self.backend.close()

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def _conn(self) -> aiosqlite.Connection:
        """The SQLite connection itself (tests read PRAGMAs through it); AttributeError on
        PostgreSQL."""
        return self.backend.conn  # type: ignore[attr-defined]

    def _transaction(self) -> AbstractAsyncContextManager[Tx]:
        return self.backend.transaction()

    async def record_decision(
        self,
        channel: str,
        chat_id: int,
        message_id: int | None,
        user_id: int | None,
        source: str,
        result: Result,
        transcript: str | None = None,
        stt_ms: float | None = None,
        reply_ms: float | None = None,
    ) -> int:
        """Store one question's outcome and commit; returns the decision id.

        ``channel`` is the front end (see :data:`CHANNELS`); ``source`` one of ``SOURCES``;
        ``transcript`` the raw speech-to-text output (voice);
        ``stt_ms``/``reply_ms`` in milliseconds. A refused ``result`` (``status.is_refusal``)
        also gets a ``refusals`` row in the same transaction. Lone surrogates in any text are
        stored as U+FFFD (the replacement character). Raises ValueError on an unknown source or
        status, or an empty channel.
        """
        _check_channel(channel)
        if source not in SOURCES:
            raise ValueError(f"source {source!r} is not one of {', '.join(SOURCES)}")
        status = Status(result.status)
        created_at = _utc_now_iso()
        citations = _storable(
            json.dumps([asdict(c) for c in result.citations], ensure_ascii=False))
        trace = _storable(json.dumps(result.trace.to_list(), ensure_ascii=False))
        transcript, query, answer, message, searched = (
            _storable(t) for t in (transcript, result.query, result.answer, result.message,
                                   result.searched or None))
        lang, mode, answer_lang = (
            _storable(t) for t in (result.lang, result.mode, result.answer_lang))
        reason = None if result.reason is None else _storable(
            json.dumps(result.reason.to_dict(), ensure_ascii=False))
        code = None if result.reason is None else result.reason.code.value
        fallback = None if result.fallback is None else result.fallback.value
        followup, basis = (None if fact is None else _storable(json.dumps(
            asdict(fact), ensure_ascii=False)) for fact in (result.followup, result.basis))
        cut = None if result.cut is None else json.dumps(asdict(result.cut))
        async with self._transaction() as conn:
            row = await conn.fetchone(
                """
                INSERT INTO decisions (
                    channel, chat_id, message_id, user_id, created_at, source, transcript,
                    query, lang, status, mode, answer, answer_lang, message,
                    top_score, floor, is_low_confidence, citations, trace,
                    total_ms, stt_ms, reply_ms, reason, fallback, searched,
                    best_passage_id, best_passage_score, followup, language_basis, cut
                ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                          ?, ?, ?, ?, ?)
                RETURNING id
                """,
                (
                    channel, chat_id, message_id, user_id, created_at, source, transcript,
                    query, lang, status.value, mode, answer,
                    answer_lang, message, result.top_score, result.floor,
                    int(result.is_low_confidence), citations, trace,
                    result.trace.total_ms, stt_ms, reply_ms, reason, fallback, searched,
                    _storable(result.best_passage_id), result.best_passage_score, followup,
                    basis, cut,
                ),
            )
            decision_id = row[0]
            if status.is_refusal:
                await conn.execute(
                    """
                    INSERT INTO refusals (
                        decision_id, channel, chat_id, created_at, status, lang, top_score,
                        floor, reason, code
                    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    (
                        decision_id, channel, chat_id, created_at, status.value, lang,
                        result.top_score, result.floor, message, code,
                    ),
                )
        return decision_id

    async def set_reply_ms(self, decision_id: int, reply_ms: float) -> None:
        """Record how long sending the reply took (milliseconds). DecisionNotFoundError if no
        such id."""
        async with self._transaction() as conn:
            n_rows = await conn.execute(
                "UPDATE decisions SET reply_ms = ? WHERE id = ?", (reply_ms, decision_id)
            )
            if n_rows == 0:
                raise DecisionNotFoundError(decision_id)

    async def add_stages(self, decision_id: int, stages: list[Stage],
                         tts_failure: str | None = None) -> None:
        """Append ``stages`` to a recorded decision's trace (work done after the reply was
        built, e.g. the spoken reply's ``text_to_speech``), so ``/why`` shows them, and record
        ``tts_failure`` (why the spoken reply could not be made, e.g. ``timeout``) when given;
        the decision's ``total_ms`` stays the pipeline's. DecisionNotFoundError if no such
        id."""
        async with self._transaction() as conn:
            await conn.lock(f"decision:{decision_id}")
            row = await conn.fetchone("SELECT trace FROM decisions WHERE id = ?", (decision_id,))
            if row is None:
                raise DecisionNotFoundError(decision_id)
            trace = json.loads(row["trace"]) + [asdict(stage) for stage in stages]
            await conn.execute(
                "UPDATE decisions SET trace = ?, tts_failure = COALESCE(?, tts_failure) "
                "WHERE id = ?",
                (_storable(json.dumps(trace, ensure_ascii=False)), _storable(tts_failure),
                 decision_id))

    async def last_decision(self, channel: str, chat_id: int) -> StoredDecision | None:
        """The chat's most recent decision (what ``/why`` explains), or None if it has none."""
        row = await self._fetchone(
            "SELECT * FROM decisions WHERE channel = ? AND chat_id = ? ORDER BY id DESC LIMIT 1",
            (channel, chat_id),
        )
        return None if row is None else _decision_from_row(row)

    async def decision(self, decision_id: int) -> StoredDecision | None:
        """Decision ``decision_id`` as stored now (with the stages added after its reply), or
        None if there is no such id."""
        row = await self._fetchone("SELECT * FROM decisions WHERE id = ?", (decision_id,))
        return None if row is None else _decision_from_row(row)

    async def refusals(self, channel: str | None = None, chat_id: int | None = None,
                       limit: int = 50) -> list[StoredRefusal]:
        """Logged refusals, newest first: of one chat (``channel`` and ``chat_id``), of one
        channel (``chat_id`` None), or of all (both None).

        ``limit`` caps the rows returned (≥ 1); ValueError otherwise, or for a ``chat_id``
        without its ``channel``.
        """
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        if chat_id is not None and channel is None:
            raise ValueError("a chat_id needs its channel: chats are keyed by (channel, chat_id)")
        if chat_id is not None:
            where, params = "WHERE channel = ? AND chat_id = ?", (channel, chat_id)
        elif channel is not None:
            where, params = "WHERE channel = ?", (channel,)
        else:
            where, params = "", ()
        rows = await self.backend.fetchall(
            f"SELECT * FROM refusals {where} ORDER BY id DESC LIMIT ?", (*params, limit))
        return [_refusal_from_row(row) for row in rows]

    async def get_chat_settings(self, channel: str, chat_id: int) -> ChatSettings:
        """The chat's settings; defaults (``auto``, ``extractive``) if it never set any."""
        row = await self._fetchone(
            "SELECT * FROM chat_settings WHERE channel = ? AND chat_id = ?", (channel, chat_id))
        if row is None:
            return ChatSettings(channel, chat_id)
        return ChatSettings(
            row["channel"], row["chat_id"], row["lang"], row["mode"],
            datetime.fromisoformat(row["updated_at"]), row["voice"],
        )

    async def set_chat_settings(
        self, channel: str, chat_id: int, lang: str | None = None, mode: str | None = None,
        voice: str | None = None,
    ) -> ChatSettings:
        """Change the chat's ``lang``, ``mode`` and/or ``voice`` (None keeps the current value).

        Returns the settings now stored. Raises ValueError if ``lang`` is not in ``CHAT_LANGS``,
        ``mode`` not in ``MODES`` or ``voice`` not in ``VOICE_MODES``, or ``channel`` is empty;
        nothing is written then.
        """
        _check_channel(channel)
        if lang is not None and lang not in CHAT_LANGS:
            raise ValueError(f"language {lang!r} is not one of {', '.join(CHAT_LANGS)}")
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        if voice is not None and voice not in VOICE_MODES:
            raise ValueError(f"voice {voice!r} is not one of {', '.join(VOICE_MODES)}")
        async with self._transaction() as conn:
            await conn.execute(
                """
                INSERT INTO chat_settings (channel, chat_id, lang, mode, voice, updated_at)
                VALUES (?, ?, COALESCE(?, 'auto'), COALESCE(?, 'extractive'), COALESCE(?, 'auto'),
                        ?)
                ON CONFLICT (channel, chat_id) DO UPDATE SET
                    lang = COALESCE(?, chat_settings.lang),
                    mode = COALESCE(?, chat_settings.mode),
                    voice = COALESCE(?, chat_settings.voice),
                    updated_at = excluded.updated_at
                """,
                (channel, chat_id, lang, mode, voice, _utc_now_iso(), lang, mode, voice),
            )
        return await self.get_chat_settings(channel, chat_id)

    async def get_chat_context(self, channel: str, chat_id: int) -> ChatContext | None:
        """The chat's conversation context as last stored, however old; None when it has none
        (never asked, or cleared by ``/new`` or a ``/lang`` change)."""
        row = await self._fetchone(
            "SELECT * FROM chat_context WHERE channel = ? AND chat_id = ?", (channel, chat_id))
        if row is None:
            return None
        return ChatContext(
            row["channel"], row["chat_id"], row["question"], row["lang"],
            tuple(json.loads(row["passage_ids"])), row["answer"], row["at_s"],
            row["n_followups"],
        )

    async def set_chat_context(self, context: ChatContext) -> None:
        """Store ``context`` as its chat's one context, replacing the one before. Lone
        surrogates are stored as U+FFFD. Raises ValueError for an empty channel or a negative
        ``n_followups``; nothing is written then."""
        _check_channel(context.channel)
        if context.n_followups < 0:
            raise ValueError(f"n_followups must be >= 0, got {context.n_followups}")
        passage_ids = _storable(json.dumps(list(context.passage_ids), ensure_ascii=False))
        question, lang, answer = (
            _storable(t) for t in (context.question, context.lang, context.answer))
        async with self._transaction() as conn:
            await conn.execute(
                """
                INSERT INTO chat_context (channel, chat_id, question, lang, passage_ids, answer,
                                          at_s, n_followups)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (channel, chat_id) DO UPDATE SET
                    question = excluded.question, lang = excluded.lang,
                    passage_ids = excluded.passage_ids, answer = excluded.answer,
                    at_s = excluded.at_s, n_followups = excluded.n_followups
                """,
                (context.channel, context.chat_id, question, lang, passage_ids, answer,
                 context.at_s, context.n_followups),
            )

    async def clear_chat_context(self, channel: str, chat_id: int) -> bool:
        """Forget the chat's conversation context; True when there was one."""
        async with self._transaction() as conn:
            n_rows = await conn.execute(
                "DELETE FROM chat_context WHERE channel = ? AND chat_id = ?", (channel, chat_id))
        return n_rows > 0

    async def count_decisions(self) -> int:
        """Number of decisions stored, across all chats."""
        row = await self._fetchone("SELECT COUNT(*) FROM decisions", ())
        return row[0]

    async def _fetchone(self, sql: str, params: tuple[Any, ...]) -> Any | None:
        return await self.backend.fetchone(sql, params)

    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return await self.backend.fetchall(sql, params)


def _check_channel(channel: str) -> None:
    if not isinstance(channel, str) or not channel:
        raise ValueError(f"channel must be a non-empty name such as 'telegram', got {channel!r}")


def _storable(text: str | None) -> str | None:
    """``text`` with lone surrogates replaced by U+FFFD, so it encodes as UTF-8."""
    return None if text is None else _SURROGATE_RE.sub("\ufffd", text)


def _utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _decision_from_row(row: aiosqlite.Row) -> StoredDecision:
    result = Result(
        status=Status(row["status"]),
        query=row["query"],
        lang=row["lang"],
        answer=row["answer"],
        answer_lang=row["answer_lang"],
        citations=[Citation(**c) for c in json.loads(row["citations"])],
        top_score=row["top_score"],
        floor=row["floor"],
        is_low_confidence=bool(row["is_low_confidence"]),
        mode=row["mode"],
        message=row["message"],
        trace=Trace.from_list(json.loads(row["trace"])),
        reason=None if row["reason"] is None else Reason.from_dict(json.loads(row["reason"])),
        fallback=None if row["fallback"] is None else FallbackCode(row["fallback"]),
        searched=row["searched"] or "",
        best_passage_id=row["best_passage_id"],
        best_passage_score=row["best_passage_score"],
        followup=None if row["followup"] is None
        else FollowUpReading(**json.loads(row["followup"])),
        basis=_basis(row["language_basis"]),
        cut=None if row["cut"] is None else QuestionCut(**json.loads(row["cut"])),
    )
    return StoredDecision(
        id=row["id"],
        channel=row["channel"],
        chat_id=row["chat_id"],
        message_id=row["message_id"],
        user_id=row["user_id"],
        source=row["source"],
        transcript=row["transcript"],
        result=result,
        total_ms=row["total_ms"],
        stt_ms=row["stt_ms"],
        reply_ms=row["reply_ms"],
        created_at=datetime.fromisoformat(row["created_at"]),
    )


def _refusal_from_row(row: aiosqlite.Row) -> StoredRefusal:
    return StoredRefusal(
        id=row["id"],
        decision_id=row["decision_id"],
        channel=row["channel"],
        chat_id=row["chat_id"],
        created_at=datetime.fromisoformat(row["created_at"]),
        status=Status(row["status"]),
        lang=row["lang"],
        top_score=row["top_score"],
        floor=row["floor"],
        reason=row["reason"],
    )


def _basis(stored: str | None) -> LanguageBasis | None:
    """The :class:`LanguageBasis` stored as JSON (its ``tied`` a list there), or None."""
    if stored is None:
        return None
    data = json.loads(stored)
    return LanguageBasis(**{**data, "tied": tuple(data.get("tied", ()))})
