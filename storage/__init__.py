"""Persistence for the bot: decisions with their traces, refusals, per-chat settings, the inbox,
and the state replicas share (rate limit, repeat window, voice-note index), on SQLite (the
embedded default) or PostgreSQL (``BOT_DATABASE_URL``), through :mod:`storage.backend`.

- :mod:`storage.backend`: ``open_backend(url)``, ``Backend`` (transaction, session, hold_lock,
  fetchone/fetchall), ``Tx`` (execute, fetchone, fetchall, executemany, lock).
- :mod:`storage.migrations`: the numbered migrations of both, applied once under a lock.
- :mod:`storage.db` (``Database``), :mod:`storage.inbox` (``Inbox``: claims, leases, per-chat
  order), :mod:`storage.ratelimit` (``RateLimitStore``), :mod:`storage.repeats`
  (``RepeatStore``), :mod:`storage.voice_index` (``VoiceIndex``), :mod:`storage.web_exchanges`
  (``WebExchanges``: the web page's conversations).
- :mod:`storage.reader`: the dashboard's read-only view over either backend.
"""

from .db import (
    CHAT_LANGS,
    MODES,
    SOURCES,
    VOICE_MODES,
    ChatContext,
    ChatSettings,
    Database,
    StoredDecision,
    StoredRefusal,
)

__all__ = [
    "CHAT_LANGS",
    "MODES",
    "SOURCES",
    "VOICE_MODES",
    "ChatContext",
    "ChatSettings",
    "Database",
    "StoredDecision",
    "StoredRefusal",
]
