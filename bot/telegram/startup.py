"""Telegram's start-up check: one getMe (:func:`connect_bot_api`), failing loudly with the fix."""

from __future__ import annotations

import logging

from telegram import Bot
from telegram.error import InvalidToken, NetworkError, TimedOut

from bot.errors import StartupError

log = logging.getLogger(__name__)


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
