"""``python -m bot dashboard``: serve the dashboard until Ctrl-C.

    python -m bot dashboard                                   # http://127.0.0.1:8081/
    python -m bot dashboard --host 0.0.0.0 --port 8081 --db data/bot.sqlite3   # needs a token
    BOT_DASHBOARD_TOKEN=... python -m bot dashboard --host 0.0.0.0

Exit code 2 with one line when it cannot start (a malformed variable, an exposed host without a
token, no database at the path).
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
from .settings import DashboardConfigError, DashboardSettings

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="interface to bind (default BOT_DASHBOARD_HOST, else "
                        "127.0.0.1; anything else needs BOT_DASHBOARD_TOKEN or a user and "
                        "password)")
    parser.add_argument("--port", type=int, help="port (default BOT_DASHBOARD_PORT, else 8081)")
    parser.add_argument("--db", type=Path, help="the bot's SQLite file, opened read-only "
                        "(default BOT_DB_PATH, else data/bot.sqlite3)")


def run_dashboard(args: argparse.Namespace) -> int:
    """Serve until interrupted; 0 after Ctrl-C, 2 when it cannot start."""
    try:
        settings = DashboardSettings.from_env()
        overrides = {k: v for k, v in (("host", args.host), ("port", args.port),
                                       ("db_path", args.db)) if v is not None}
        settings = replace(settings, **overrides)
        if not 0 <= settings.port <= 65535:
            raise DashboardConfigError(f"--port must be from 0 to 65535, got {settings.port}")
        app = create_app(settings)
    except DashboardConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(app, settings))
    except DatabaseOpenError as exc:
        print(f"error: cannot read the database {exc.path} (--db, BOT_DB_PATH): {exc.detail}",
              file=sys.stderr)
        return 2
    except OSError as exc:  # the port is taken, the host is not this machine's
        print(f"error: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


async def _serve(app: web.Application, settings: DashboardSettings) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()  # opens the database (on_startup)
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        urls = [f"http://{s.getsockname()[0]}:{s.getsockname()[1]}/" for s in sockets]
        auth = "required" if app[GUARD].is_required else "none (loopback)"
        for url in urls or [site.name]:
            log.info("dashboard_listening url=%s db=%s auth=%s", url, settings.db_path, auth)
            print(f"dashboard: {url} (database {settings.db_path}, read-only; auth {auth})",
                  flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
