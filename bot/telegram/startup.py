"""Telegram's start-up checks, failing loudly with the fix: its settings before the index is
loaded (:func:`check_telegram_settings`: the token, the webhook secret), then one getMe
(:func:`connect_bot_api`). What every front end needs is ``bot.startup``."""

from __future__ import annotations

import logging
import re

from telegram import Bot
from telegram.error import InvalidToken, NetworkError, TimedOut

from bot.errors import StartupError
from bot.settings import TelegramSettings

log = logging.getLogger(__name__)

_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
"""What Telegram accepts as a webhook's ``secret_token`` (setWebhook: 1-256 characters)."""


def check_telegram_settings(tg: TelegramSettings) -> None:
    """Check that ``TELEGRAM_TOKEN`` is set and, with ``TELEGRAM_WEBHOOK_URL``, that
    ``TELEGRAM_WEBHOOK_SECRET`` is one Telegram accepts; no network.

    Raises:
        StartupError: the first problem found, with the fix.
    """
    if not tg.token:
        raise StartupError("TELEGRAM_TOKEN is not set: create a bot with @BotFather and export "
                           "TELEGRAM_TOKEN=<token> (or try `python -m bot --console`)")
    if tg.is_webhook and not _SECRET_RE.fullmatch(tg.webhook_secret):
        raise StartupError("TELEGRAM_WEBHOOK_URL is set but TELEGRAM_WEBHOOK_SECRET is missing or "
                           "invalid: set 1-256 characters of A-Z a-z 0-9 _ -")


async def connect_bot_api(bot: Bot, api_base: str) -> None:
    """Initialise ``bot`` (one getMe call), so that an unreachable Bot API or a rejected token
    stops the bot with one line instead of PTB's chained tracebacks; ``api_base`` is
    ``TELEGRAM_API_BASE``, named in the message.

    Raises:
        StartupError: a network error, a timeout or an invalid token (the token is not shown).
    """
    try:
        await bot.initialize()
    except (NetworkError, TimedOut, InvalidToken) as exc:  # TimedOut is a NetworkError too
        await bot.shutdown()
        raise StartupError(f"cannot reach the Telegram Bot API at {api_base}: {_reason(exc)}; "
                           "check the network, the token, or TELEGRAM_API_BASE") from exc
    log.info("startup bot_api=ok username=%s", bot.username)


def _reason(exc: NetworkError | InvalidToken) -> str:
    """The error's text without the token: PTB's InvalidToken message repeats it, the server's
    answer it wraps ("Unauthorized") does not."""
    if isinstance(exc, InvalidToken):
        server = exc.__cause__.message if isinstance(exc.__cause__, InvalidToken) else "rejected"
        return f"the token was refused ({server})"
    return exc.message
