"""``python -m bot dashboard``: serve the dashboard until Ctrl-C.

    python -m bot dashboard                                   # http://127.0.0.1:8081/
    python -m bot dashboard --host 0.0.0.0 --port 8081 --db data/bot.sqlite3   # needs a token
    BOT_DASHBOARD_TOKEN=... python -m bot dashboard --host 0.0.0.0
    BOT_DATABASE_URL=postgresql://dashboard@db.internal/bot python -m bot dashboard  # replicas'
    python -m bot dashboard --db postgresql://dashboard@db.internal/bot

Exit code 2 with one line (printed and logged) when it cannot start (a malformed variable, an
exposed host without a token, no database at the path, a database URL of another scheme, a
PostgreSQL server out of reach or a database without the bot's tables).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import replace
from pathlib import Path

from aiohttp import web

from storage.errors import DatabaseOpenError

from .app import GUARD, create_app
from .settings import DATABASE_VARIABLES, DashboardConfigError, DashboardSettings

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="interface to bind (default BOT_DASHBOARD_HOST, else "
                        "127.0.0.1; anything else needs BOT_DASHBOARD_TOKEN or a user and "
                        "password)")
    parser.add_argument("--port", type=int, help="port (default BOT_DASHBOARD_PORT, else 8081)")
    parser.add_argument("--db", help="the bot's database, read-only: its SQLite file, or a "
                        "postgresql:// (or sqlite:///) URL (default BOT_DASHBOARD_DATABASE_URL, "
                        "BOT_DASHBOARD_DB_PATH, BOT_DATABASE_URL, BOT_DB_PATH, else "
                        "data/bot.sqlite3)")


def database_override(db: str | None) -> dict[str, object]:
    """The settings ``--db`` replaces: a text with ``://`` is a URL (``database_url``), anything
    else the SQLite file (``db_path``, with the URL cleared so the file wins over
    ``BOT_DATABASE_URL``); nothing when not given."""
    if db is None:
        return {}
    if "://" in db:
        return {"database_url": db}
    return {"db_path": Path(db), "database_url": ""}


def run_dashboard(args: argparse.Namespace) -> int:
    """Serve until interrupted; 0 after Ctrl-C, 2 when it cannot start."""
    try:
        settings = DashboardSettings.from_env()
        overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
        settings = replace(settings, **overrides, **database_override(args.db))
        if not 0 <= settings.port <= 65535:
            raise DashboardConfigError(f"--port must be from 0 to 65535, got {settings.port}")
        app = create_app(settings)
    except DashboardConfigError as exc:
        return _cannot_start("config", str(exc))
    try:
        asyncio.run(_serve(app, settings))
    except DatabaseOpenError as exc:
        return _cannot_start("database", f"cannot read the database {exc.path} "
                             f"({DATABASE_VARIABLES}): {exc.detail}")
    except OSError as exc:  # the port is taken, the host is not this machine's
        print(f"error: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _cannot_start(reason: str, message: str) -> int:
    """Print ``message`` as one ``error:`` line, log it, and return exit code 2."""
    log.error("dashboard_not_started reason=%s detail=%s", reason, message)
    print(f"error: {message}", file=sys.stderr)
    return 2


async def _serve(app: web.Application, settings: DashboardSettings) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()  # opens the database (on_startup)
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        urls = [f"http://{s.getsockname()[0]}:{s.getsockname()[1]}/" for s in sockets]
        auth = "required" if app[GUARD].is_required else "none (loopback)"
        database = settings.database.display  # no password
        for url in urls or [site.name]:
            log.info("dashboard_listening url=%s db=%s auth=%s", url, database, auth)
            print(f"dashboard: {url} (database {database}, read-only; auth {auth})", flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
