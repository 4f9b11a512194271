"""The dashboard's settings: environment variables ``BOT_DASHBOARD_<FIELD>`` (and the bot's own
``BOT_DATABASE_URL`` or ``BOT_DB_PATH`` for the database), overridden by ``python -m bot dashboard
--host/--port/--db``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from bot.settings import is_loopback_host
from rag.settings import DEFAULT_DATA_DIR, bounded, settings_from_env, wire_text
from storage.backend import DatabaseUrl, parse_database_url

DATABASE_VARIABLES = "--db, BOT_DASHBOARD_DATABASE_URL, BOT_DATABASE_URL or BOT_DB_PATH"
"""Where the database read is set, for messages."""


class DashboardConfigError(ValueError):
    """Settings that would expose the dashboard without a way to check who reads it, or a
    malformed variable; ``str(err)`` says which variable to set."""


@dataclass(frozen=True, slots=True)
class DashboardSettings:
    """Where the dashboard listens and who may read it; variables ``BOT_DASHBOARD_<FIELD>``."""

    # Interface to bind. Anything but loopback (127.0.0.1, ::1, localhost) exposes the
    # decision log, so a token or a user and password is then required.
    host: str = "127.0.0.1"
    port: int = bounded(8081, 0, 65535)
    # The bot's SQLite file, read-only (``BOT_DB_PATH`` when neither this nor a database URL is
    # set).
    db_path: Path = DEFAULT_DATA_DIR / "bot.sqlite3"
    # The bot's database when not ``db_path``, read-only: ``postgresql://user:password@host/db``
    # (the one replicas share) or ``sqlite:///path``. Not set (and ``BOT_DASHBOARD_DB_PATH`` not
    # set either): the bot's ``BOT_DATABASE_URL``. Empty: ``db_path``.
    database_url: str = ""
    # Bearer token: ``Authorization: Bearer <token>``, or ``?token=<token>`` once (it is then
    # kept in a cookie). Required when the host is not loopback, unless user and password are.
    token: str = wire_text("")
    # HTTP basic auth, the alternative to the token.
    user: str = wire_text("")
    password: str = wire_text("")
    # Show chat and user ids as keyed hashes (HMAC-SHA256, 10 hex digits) instead of numbers.
    hash_ids: bool = False
    # Key of those hashes; empty: the token, else a random key per process (hashes then change
    # at every start). Set it to keep hashes stable across restarts.
    hash_key: str = wire_text("")
    # Rows per page of the questions list (``?per=`` may ask for up to ``max_page_size``).
    page_size: int = bounded(50, 1, 1000)
    max_page_size: int = bounded(1000, 1, 10000)
    # Folder of the index whose ``passages.jsonl`` gives the refusal export each best passage's
    # text; empty or missing: the export has the passage id and score only.
    index_dir: Path = DEFAULT_DATA_DIR / "index"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DashboardSettings:
        """Read ``BOT_DASHBOARD_*``, with the bot's settings as defaults: the database is
        ``BOT_DASHBOARD_DATABASE_URL``, else ``BOT_DASHBOARD_DB_PATH``, else the bot's
        ``BOT_DATABASE_URL``, else ``BOT_DB_PATH`` (the bot itself prefers the URL too); the
        index ``VOICE_RAG_INDEX_DIR``.

        Raises:
            DashboardConfigError: a malformed value, naming the variable.
        """
        env = os.environ if env is None else env
        try:
            settings = settings_from_env(cls, env, "BOT_DASHBOARD_")
        except ValueError as exc:
            raise DashboardConfigError(str(exc)) from None
        if not env.get("BOT_DASHBOARD_DATABASE_URL") and not env.get("BOT_DASHBOARD_DB_PATH"):
            if env.get("BOT_DATABASE_URL", "").strip():
                settings = replace(settings, database_url=env["BOT_DATABASE_URL"].strip())
            elif env.get("BOT_DB_PATH"):
                settings = replace(settings, db_path=Path(env["BOT_DB_PATH"]))
        if not env.get("BOT_DASHBOARD_INDEX_DIR") and env.get("VOICE_RAG_INDEX_DIR"):
            settings = replace(settings, index_dir=Path(env["VOICE_RAG_INDEX_DIR"]))
        return settings

    @property
    def database(self) -> DatabaseUrl:
        """The database read: ``database_url`` when set, else ``db_path``.

        Raises:
            DashboardConfigError: a URL of another scheme than sqlite or postgresql, or an
                sqlite URL without a file (the message shows no password).
        """
        try:
            return parse_database_url(self.database_url.strip() or self.db_path)
        except ValueError:
            parts = urlsplit(self.database_url.strip())
            raise DashboardConfigError(
                f"the dashboard's database ({DATABASE_VARIABLES}) must be an SQLite file, "
                "sqlite:///path or postgresql://user:password@host:5432/db; got a URL of scheme "
                f"{parts.scheme!r}" + (" naming no file" if parts.scheme == "sqlite" else "")
            ) from None

    @property
    def is_loopback(self) -> bool:
        """Whether ``host`` binds to this machine only."""
        return is_loopback_host(self.host)

    @property
    def has_credentials(self) -> bool:
        return bool(self.token) or bool(self.user and self.password)

    def check_exposure(self, is_exposed: bool) -> None:
        """Raise :class:`DashboardConfigError` when ``is_exposed`` and no token or user and
        password is set; or when only one of user and password is set."""
        if bool(self.user) != bool(self.password):
            raise DashboardConfigError("set both BOT_DASHBOARD_USER and BOT_DASHBOARD_PASSWORD "
                                       "for basic auth, or neither")
        if is_exposed and not self.has_credentials:
            raise DashboardConfigError(
                f"the dashboard would be reachable beyond this machine (host {self.host}): set "
                "BOT_DASHBOARD_TOKEN (or BOT_DASHBOARD_USER and BOT_DASHBOARD_PASSWORD), or bind "
                "to 127.0.0.1")
