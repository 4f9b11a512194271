"""``python -m bot``: parse the command line, check the start-up, run one front end.

    python -m bot              # Telegram (TELEGRAM_TOKEN, SARVAM_API_KEY, ...; bot.telegram)
    python -m bot --console    # the same logic in a terminal, no token (bot.terminal.console)
    python -m bot --whatsapp   # the WhatsApp Cloud API webhook (bot.whatsapp)
    python -m bot --web        # a page in the browser, http://127.0.0.1:8082/ (bot.web)
    python -m bot --web --host 0.0.0.0 --port 8082 [--demo-voice]   # (BOT_WEB_TOKEN needed)
    python -m bot ask "How much does an Xbox 360 cost?" [--lang hi] [--json] [--generative]
    python -m bot dashboard [--host 127.0.0.1 --port 8081 --db data/bot.sqlite3]  # bot.dashboard

The front ends never import this module or each other: it is the one place that picks them.
See ``bot.settings`` for every variable. Exit code 2 when the bot cannot start.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

from bot.dashboard import cli as dashboard
from bot.errors import SettingsError, StartupError
from bot.settings import Settings
from bot.startup import check_startup
from bot.telegram import app
from bot.telegram.startup import check_telegram_settings
from bot.terminal import ask, console
from bot.web import app as web
from bot.web.demo import sarvam_standin, with_demo_voice
from bot.web.settings import WebSettings
from bot.whatsapp import app as whatsapp
from rag.errors import RagError
from storage.errors import DatabaseOpenError


def configure_logging(level: int = logging.INFO) -> None:
    """One key=value line per event; noisy libraries at WARNING."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for name in ("httpx", "httpcore", "aiosqlite", "telegram.ext.AIORateLimiter"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _port(text: str) -> int:
    """``--port``'s value: an integer in 0-65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {text!r}")
    return port


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bot``; returns the exit code (2 when it cannot start; for
    ``ask``: 0 answered, 1 refused, 2 error)."""
    parser = argparse.ArgumentParser(
        prog="python -m bot", description="The VOICE-RAG bot on Telegram (the default), in this "
        "terminal (--console), on WhatsApp (--whatsapp), on a web page (--web), or one question "
        "(ask).")
    parser.add_argument("--console", action="store_true", help="chat in this terminal instead")
    parser.add_argument("--whatsapp", action="store_true",
                        help="serve the WhatsApp Cloud API webhook instead (see bot.whatsapp.app)")
    parser.add_argument("--web", action="store_true",
                        help="serve the page in the browser instead: http://127.0.0.1:8082/ "
                        "(see bot.web.app)")
    web_options = parser.add_argument_group("with --web")
    web_options.add_argument("--host", dest="web_host",
                             help="interface to listen on (default $BOT_WEB_HOST, else "
                             "127.0.0.1; anything else needs BOT_WEB_TOKEN)")
    web_options.add_argument("--port", dest="web_port", type=_port,
                             help="port (default $BOT_WEB_PORT, else 8082; 0: any free port)")
    web_options.add_argument("--demo-voice", action="store_true",
                             help="try the microphone offline: speech through the local Sarvam "
                             "stand-in, whose transcripts are scripted (the page says so)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="with --console: print the INFO log lines too (default: warnings)")
    sub = parser.add_subparsers(dest="command")
    ask.add_arguments(sub.add_parser("ask", help="answer one question and exit",
                                     description="Answer one question from the index and exit "
                                     "(0 answered, 1 refused, 2 error)."))
    dashboard.add_arguments(sub.add_parser(
        "dashboard", help="serve the operator's dashboard over the decision log (read-only)",
        description="The operator's web page over the decision log, and /metrics: "
        "http://127.0.0.1:8081/ by default (see bot.dashboard)."))
    args = parser.parse_args(argv)
    if not args.web and (args.web_host or args.web_port is not None or args.demo_voice):
        parser.error("--host, --port and --demo-voice go with --web (the dashboard: python -m "
                     "bot dashboard --host ... --port ...)")
    if args.command == "ask":
        return ask.run_ask(args)
    if args.command == "dashboard":
        configure_logging()
        return dashboard.run_dashboard(args)
    # the console is a chat in this terminal: its INFO lines (one per decision) would interleave
    # with the replies; the servers log every event
    quiet = args.console and not args.verbose
    configure_logging(logging.WARNING if quiet else logging.INFO)
    web_settings = None
    if args.web:  # checked before minutes of loading the index
        try:
            web_settings = WebSettings.from_env(host=args.web_host, port=args.web_port)
            problem = web_settings.start_problem()
        except SettingsError as exc:
            problem = str(exc)
        if problem is not None:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    with contextlib.ExitStack() as beside:  # what runs beside the bot: --demo-voice's stand-in
        return _start(args, web_settings, beside)


def _start(args: argparse.Namespace, web_settings: WebSettings | None,
           beside: contextlib.ExitStack) -> int:
    """Read the settings, check the start-up, run the chosen front end; the exit code."""
    demo = None
    try:
        settings = Settings.from_env()
        if args.demo_voice:  # before the checks: they warn about a missing SARVAM_API_KEY
            demo = beside.enter_context(sarvam_standin())
            settings = with_demo_voice(settings, demo)
        if not (args.console or args.whatsapp or args.web):  # Telegram, the default front end
            check_telegram_settings(settings.telegram)  # before minutes of loading the index
        check_startup(settings)  # what every front end needs
    except (StartupError, RagError) as exc:  # settings, token, ffmpeg, index (or its build)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.console:
            return console.run_console(settings)
        if args.whatsapp:
            return whatsapp.run_whatsapp(settings)
        if web_settings is not None:
            return web.run_web(settings, web_settings, demo)
        app.run(app.build_application(settings), settings)
    except (StartupError, RagError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DatabaseOpenError as exc:
        print(f"error: cannot open the database {exc.path} (BOT_DB_PATH): {exc.detail}",
              file=sys.stderr)
        return 2
    return 0
