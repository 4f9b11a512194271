"""The bot's settings: one typed object built once in ``main()`` from environment variables.

Sections and their prefixes:

- ``VOICE_RAG_*``   core floors, index and encoder (``rag.settings.RagSettings``)
- ``SARVAM_*``      speech-to-text (``clients.stt.SarvamSettings``)
- ``SARVAM_TTS_*``  spoken replies (``clients.tts.SarvamTTSSettings``)
- ``OPENROUTER_*``  generative answers (``clients.openrouter.OpenRouterSettings``)
- ``TELEGRAM_*``    token, API base URLs, webhook (:class:`TelegramSettings`)
- ``BOT_*``         storage, limits and access (:class:`BotSettings`)
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from bot.errors import SettingsError
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from clients.tts import SarvamTTSSettings
from rag.settings import (
    DEFAULT_DATA_DIR,
    RagSettings,
    bounded,
    env_number,
    settings_from_env,
    wire_text,
)


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """How to reach the Bot API; environment variables ``TELEGRAM_<FIELD>``."""

    # From @BotFather. Required to run the bot (not the console).
    token: str = wire_text("")
    # Bot API base URLs; PTB appends the token. Point them at a local Bot API server or
    # ``python -m standins.telegram`` (e.g. http://127.0.0.1:8081/bot and .../file/bot).
    api_base: str = "https://api.telegram.org/bot"
    file_base: str = "https://api.telegram.org/file/bot"
    # Long-poll timeout in seconds (Telegram holds getUpdates open this long when idle).
    poll_timeout_s: int = bounded(10, 0)
    # Webhook mode when set: the public HTTPS URL Telegram posts to (ports 443/80/88/8443).
    webhook_url: str = ""
    # Echoed by Telegram in X-Telegram-Bot-Api-Secret-Token; 1-256 of A-Z a-z 0-9 _ -.
    # Required in webhook mode.
    webhook_secret: str = ""
    webhook_listen: str = "0.0.0.0"
    # Local port the webhook server binds; a PaaS's $PORT is used when this is not set.
    webhook_port: int = bounded(8443, 1, 65535)
    # Retries of a request that got 429 RetryAfter, each after the server's wait (AIORateLimiter).
    max_retries: int = bounded(3, 0)
    # Messages per second across all chats (Telegram's broadcast limit is about 30/s); 0 = no
    # client-side cap (benchmarks).
    overall_max_rate: float = bounded(30.0, 0.0)
    # Seconds between re-sent chat actions: an action shows for about 5 s (Bot API docs).
    chat_action_interval_s: float = bounded(4.5, 1.0)

    @property
    def is_webhook(self) -> bool:
        return bool(self.webhook_url)


@dataclass(frozen=True, slots=True)
class BotSettings:
    """Storage, limits and access; environment variables ``BOT_<FIELD>``."""

    # SQLite file of decisions, refusals and chat settings.
    db_path: Path = DEFAULT_DATA_DIR / "bot.sqlite3"
    # Where the database is, when not ``db_path``: ``postgresql://user:password@host:5432/db``
    # (every replica of the bot on one database) or ``sqlite:///path``. Empty: ``db_path``.
    database_url: str = ""
    # Per-user rate limit: at most ``rate_limit_n`` messages that get a reply (questions,
    # voice notes, /help, /lang, /mode, notices) per ``rate_limit_window_s`` seconds (0 turns
    # it off); beyond it one "please wait" notice per window, the rest dropped with a log line.
    # 5 per 30 s leaves room for a follow-up but stops floods that would queue minutes of
    # speech-to-text.
    rate_limit_n: int = 5
    rate_limit_window_s: float = bounded(30.0, 1.0)
    # Comma-separated Telegram user ids allowed to use the bot; empty = everyone.
    allowed_user_ids: tuple[int, ...] = ()
    # Longest voice note transcribed, in seconds: longer notes are split into chunks of at most
    # 29 s (Sarvam's REST limit is 30 s), one request each; 120 s = at most 5 requests.
    max_voice_s: int = bounded(120, 1)
    # Threads answering questions. The encoder runs one query at a time (a lock), so more
    # threads add no throughput on 2 cores and only contend for the GIL with the event loop
    # (scripts/bench_bot.py, 50 chats at once: docs/benchmarks.md, "Figures behind the code's
    # constants").
    pipeline_threads: int = bounded(2, 1)
    # Threads encoding spoken replies to OGG/Opus (one ffmpeg process each). On 2 cores one
    # keeps ffmpeg from crowding out the event loop (scripts/bench_bot.py, 10 chats at once).
    voice_threads: int = bounded(1, 1)
    # Build the index at start-up when it is missing (minutes on 2 cores) instead of exiting.
    build_index: bool = False
    # Seconds after which a question still unanswered (left pending by a crash, or delivered
    # late by Telegram after an outage) gets a short apology instead of an answer: 10 minutes,
    # longer than any restart, short enough that a late answer would still surprise nobody.
    inbox_max_age_s: float = bounded(600.0, 1.0)
    # Seconds within which the same question from the same chat is answered once (a double tap,
    # a resend on a flaky connection); the first repeat gets a one-line pointer, later ones
    # nothing. 30 s: long enough for the slowest voice answer, short enough that asking again
    # later (the answer was missed) gets a fresh answer. 0 turns it off.
    repeat_window_s: float = bounded(30.0, 0.0)
    # Replicas on one PostgreSQL database (``database_url``): seconds a replica holds a message
    # it is answering, renewed every third of it while it works. A replica killed mid-answer
    # leaves the message to another replica after at most this long (plus ``inbox_sweep_s``).
    # 30 s: far above one answer's renewal gap on a loaded 2-core box, short enough that a
    # user of a dead replica waits well under a minute. Unused on SQLite (one process).
    inbox_lease_s: float = bounded(30.0, 1.0)
    # Replicas: seconds between sweeps for messages nobody holds (stored by a replica that
    # died before taking them, or whose lease expired), and for replies left on the wire.
    inbox_sweep_s: float = bounded(5.0, 0.1)
    # Replicas: the folder where spoken replies are kept so every replica reuses them (the
    # index of what is there lives in the database); must be shared by the replicas (one
    # machine, or a shared volume). Its size is bounded by ``SARVAM_TTS_CACHE_MB``.
    voice_cache_dir: Path = DEFAULT_DATA_DIR / "voice-cache"


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the bot reads from the environment, by section."""

    rag: RagSettings
    sarvam: SarvamSettings
    openrouter: OpenRouterSettings
    telegram: TelegramSettings
    bot: BotSettings
    tts: SarvamTTSSettings = SarvamTTSSettings()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every section from ``env`` (default ``os.environ``).

        Raises:
            SettingsError: a malformed value, naming the variable (e.g. ``BOT_MAX_VOICE_S=2m``,
                ``BOT_ALLOWED_USER_IDS=12,abc``, ``VOICE_RAG_USE_GATE=maybe``).
        """
        try:
            return cls._read(os.environ if env is None else env)
        except ValueError as exc:  # the section readers' (rag.settings) and ours, below
            raise SettingsError(str(exc)) from None

    @classmethod
    def _read(cls, env: Mapping[str, str]) -> Settings:
        bot = settings_from_env(BotSettings, env, "BOT_")
        try:
            ids = tuple(int(x) for x in bot.allowed_user_ids)
        except ValueError as exc:
            raise ValueError(
                f"BOT_ALLOWED_USER_IDS must be comma-separated integers, got "
                f"{env.get('BOT_ALLOWED_USER_IDS')!r}"
            ) from exc
        telegram = settings_from_env(TelegramSettings, env, "TELEGRAM_")
        if env.get("PORT") and not env.get("TELEGRAM_WEBHOOK_PORT"):
            bounds = next(f.metadata for f in fields(TelegramSettings) if f.name == "webhook_port")
            telegram = replace(telegram, webhook_port=env_number(int, env["PORT"], "PORT", bounds))
        return cls(
            rag=RagSettings.from_env(env),
            sarvam=SarvamSettings.from_env(env),
            openrouter=OpenRouterSettings.from_env(env),
            telegram=telegram,
            bot=replace(bot, allowed_user_ids=ids),
            tts=SarvamTTSSettings.from_env(env),
        )


LOOPBACK_HOSTS = ("localhost",)
"""Host names that bind to the loopback interface only (besides 127.0.0.0/8 and ::1)."""


def is_loopback_host(host: str) -> bool:
    """Whether binding to ``host`` reaches this machine only (the dashboard and the web page
    refuse to bind anywhere else without a token)."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False
