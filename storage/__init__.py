"""Persistence for the bot: decisions with their traces, refusals, per-chat settings (SQLite)."""

from .db import (
    CHAT_LANGS,
    MODES,
    SOURCES,
    VOICE_MODES,
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
    "ChatSettings",
    "Database",
    "StoredDecision",
    "StoredRefusal",
]
