"""Composition root of the Telegram bot: settings → Application → handlers → run (long
polling, or a webhook). ``python -m bot`` (``bot.cli``) checks the start-up and calls
:func:`run`; ``TELEGRAM_TOKEN``, ``SARVAM_API_KEY``, ``VOICE_RAG_INDEX_DIR``, ... (see
``bot.settings`` for every variable).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from functools import partial
from urllib.parse import urlparse

from telegram import BotCommand, Update
from telegram.constants import ParseMode
from telegram.error import TelegramError
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    ContextTypes,
    Defaults,
    MessageHandler,
    filters,
)

from bot.chat.inbox import channel_inbox
from bot.chat.messages import t
from bot.chat.policy import ChannelPolicy
from bot.chat.services import Services
from bot.errors import StartupError
from bot.settings import Settings, TelegramSettings
from bot.telegram import handlers
from bot.telegram.handlers import BotContext
from bot.telegram.inbox import DurableUpdateQueue, InboxApplication, InboxRateLimiter, replay
from bot.telegram.incoming import CHANNEL
from bot.telegram.outbox import TelegramOutbox
from bot.telegram.startup import connect_bot_api
from rag.pipeline import Pipeline
from rag.types import LANGUAGES

log = logging.getLogger(__name__)

ALLOWED_UPDATES = [Update.MESSAGE, Update.EDITED_MESSAGE]
"""Update types the bot asks for (an edited question is answered again)."""
COMMANDS = ("start", "help", "why", "new", "lang", "mode", "voice")
TELEGRAM_DOWNLOAD_LIMIT_BYTES = 20 * 1024 * 1024
"""Largest file a bot may download (Bot API ``getFile``: "up to 20 MB in size")."""


def telegram_policy(settings: Settings) -> ChannelPolicy:
    """Telegram's rules for the chat layer: ``BOT_ALLOWED_USER_IDS``, the 20 MB download."""
    return ChannelPolicy(CHANNEL, frozenset(settings.bot.allowed_user_ids),
                         max_voice_bytes=TELEGRAM_DOWNLOAD_LIMIT_BYTES)


def overall_rate_limiter(tg: TelegramSettings) -> AIORateLimiter:
    """PTB's rate limiter at ``tg.overall_max_rate`` messages per second (0: no cap), marking
    replies ``sending`` in the inbox as they go out (``bot.telegram.inbox.InboxRateLimiter``). A
    rate
    below 1/s is one message per 1/rate seconds: aiolimiter cannot hold under one message."""
    rate = tg.overall_max_rate
    if 0 < rate < 1:
        return InboxRateLimiter(overall_max_rate=1, overall_time_period=1 / rate,
                                max_retries=tg.max_retries)
    return InboxRateLimiter(overall_max_rate=rate, max_retries=tg.max_retries)


def build_application(settings: Settings, pipeline: Pipeline | None = None) -> Application:
    """The PTB Application: HTML replies, concurrent updates, RetryAfter honoured.

    ``pipeline`` is loaded from ``settings.rag`` in ``post_init`` unless given (tests, bench).
    """
    tg = settings.telegram
    app = (
        ApplicationBuilder()
        .token(tg.token)
        .base_url(tg.api_base)
        .base_file_url(tg.file_base)
        .application_class(InboxApplication)
        .update_queue(DurableUpdateQueue())  # commits each update before Telegram forgets it
        .context_types(ContextTypes(context=BotContext))
        .defaults(Defaults(parse_mode=ParseMode.HTML))
        .concurrent_updates(True)
        .rate_limiter(overall_rate_limiter(tg))
        .post_init(partial(open_services, settings=settings, pipeline=pipeline))
        .post_stop(stop_answering)
        .post_shutdown(close_services)
        .build()
    )
    add_handlers(app, settings)
    return app


def add_handlers(app: Application, settings: Settings) -> None:
    # typed text: commands (parsed by the chat layer) and questions
    app.add_handler(MessageHandler(filters.TEXT, handlers.on_text))
    # voice notes and audio
    app.add_handler(MessageHandler(filters.VOICE | filters.AUDIO | filters.Document.AUDIO,
                                   handlers.on_voice))
    # anything else said to the bot (stickers, photos, ...)
    app.add_handler(MessageHandler(~filters.StatusUpdate.ALL, handlers.on_other))
    # failures
    app.add_error_handler(handlers.on_error)


async def open_services(app: Application, *, settings: Settings,
                        pipeline: Pipeline | None) -> None:
    """post_init: load the pipeline, open the database and clients, register Telegram's policy
    and outbox, attach the durable inbox and queue again what a crash left pending, publish the
    commands."""
    services = await Services.open(settings, pipeline)
    services.channels[CHANNEL] = telegram_policy(settings)
    app.bot_data["services"] = services
    app.bot_data["outbox"] = TelegramOutbox(app.bot, settings.telegram.chat_action_interval_s)
    inbox = channel_inbox(services, CHANNEL)
    app.bot_data["inbox"] = inbox
    if isinstance(app.update_queue, DurableUpdateQueue):
        app.update_queue.inbox = inbox
    handle = app.handle_stored if isinstance(app, InboxApplication) else None
    n_replayed = await replay(inbox, app.bot, app.update_queue, handle)
    log.info("inbox_open n_replayed=%d max_age_s=%.0f shared=%s", n_replayed, inbox.max_age_s,
             inbox.is_shared)
    await set_commands(app)


async def stop_answering(app: Application) -> None:
    """post_stop: let the dispatcher's answers under way finish (replicas; bounded by
    ``bot.chat.dispatch.CLOSE_WAIT_S``). PTB calls it after ``Application.stop()`` (no more
    updates; its own handlers have finished) and before ``Application.shutdown()`` closes the
    bot's HTTP client, so a reply still being sent keeps its connection."""
    inbox = app.bot_data.get("inbox")
    if inbox is not None:
        await inbox.aclose()


async def close_services(app: Application) -> None:
    """post_shutdown: close clients and the database (after :func:`stop_answering`)."""
    services = app.bot_data.pop("services", None)
    if services is not None:
        await services.close()


async def set_commands(app: Application) -> None:
    """The command menu with descriptions in English (default), Hindi, Gujarati and Telugu."""
    try:
        for lang in LANGUAGES:
            commands = [BotCommand(name, t(f"cmd_{name}", lang)) for name in COMMANDS]
            await app.bot.set_my_commands(commands, language_code=None if lang == "en" else lang)
    except TelegramError as exc:  # cosmetic: the bot works without a menu
        log.warning("set_my_commands_failed detail=%s", exc)


@contextlib.asynccontextmanager
async def polling(app: Application, settings: Settings) -> AsyncIterator[Application]:
    """Long-poll inside an already running event loop (tests, benchmarks), as ``run_polling``
    does: initialize, post_init, start, poll (getUpdates failures such as 409 Conflict go to
    the error handler); on exit stop polling, stop, post_stop, shutdown, post_shutdown (PTB's
    order)."""
    await app.initialize()
    try:
        await app.post_init(app)
        await app.start()
        await app.updater.start_polling(
            timeout=settings.telegram.poll_timeout_s, allowed_updates=ALLOWED_UPDATES,
            error_callback=lambda exc: app.create_task(app.process_error(error=exc, update=None)),
        )
        yield app
    finally:
        if app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.post_stop(app)
        await app.shutdown()
        await app.post_shutdown(app)


def run(app: Application, settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM: a webhook when ``TELEGRAM_WEBHOOK_URL`` is set, else long
    polling.

    Raises:
        StartupError: the Bot API cannot be reached or refuses the token (checked with getMe
            on the event loop PTB then runs on, before anything else starts).
    """
    tg = settings.telegram
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # run_polling/run_webhook run on the current loop
    try:
        loop.run_until_complete(connect_bot_api(app.bot, tg.api_base))
    except StartupError:
        loop.close()
        raise
    if tg.is_webhook:
        log.info("start mode=webhook url=%s listen=%s port=%d", tg.webhook_url, tg.webhook_listen,
                 tg.webhook_port)
        app.run_webhook(listen=tg.webhook_listen, port=tg.webhook_port,
                        url_path=urlparse(tg.webhook_url).path.lstrip("/"),
                        webhook_url=tg.webhook_url, secret_token=tg.webhook_secret,
                        allowed_updates=ALLOWED_UPDATES)
    else:
        log.info("start mode=polling api_base=%s poll_timeout_s=%d", tg.api_base,
                 tg.poll_timeout_s)
        app.run_polling(timeout=tg.poll_timeout_s, allowed_updates=ALLOWED_UPDATES)
