"""Errors of the storage layer, under one base: :class:`StorageError`.

Storage raises its own errors where it knows what went wrong (a database that cannot be opened,
a decision id that does not exist); the bot words them for the operator or the user. Invalid
arguments (a ``source``, ``lang``, ``mode`` or ``voice`` outside its allowed values) are the
caller's mistake and stay ``ValueError``.
"""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base class of storage's errors; ``str(err)`` is for the log and the operator."""


class DatabaseOpenError(StorageError):
    """The database at ``path`` cannot be opened or migrated (a folder, a file that is not
    SQLite, no write permission, a PostgreSQL server out of reach or refusing the login, a failed
    migration); ``detail`` is the driver's message. ``path`` is the SQLite file, or the
    PostgreSQL URL without its password."""

    def __init__(self, path: Path | str, detail: str) -> None:
        super().__init__(f"cannot open the database {path}: {detail}")
        self.path, self.detail = path, detail


class DecisionNotFoundError(StorageError, LookupError):
    """No decision with id ``decision_id`` (e.g. the database was cleared since it was
    recorded). A ``LookupError`` too."""

    def __init__(self, decision_id: int) -> None:
        super().__init__(f"no decision with id {decision_id}")
        self.decision_id = decision_id
