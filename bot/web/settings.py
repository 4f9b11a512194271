"""The web channel's settings: environment variables ``BOT_WEB_<FIELD>``, and the ``--host`` /
``--port`` options of ``python -m bot --web``, which win over ``BOT_WEB_HOST`` /
``BOT_WEB_PORT``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from bot.errors import SettingsError
from bot.settings import is_loopback_host
from bot.web.assets import DEFAULT_FONTS_DIR
from rag.settings import bounded, settings_from_env, wire_text

MIN_TOKEN_CHARS = 16
"""Shortest ``BOT_WEB_TOKEN`` accepted: 16 characters of ``openssl rand -hex 16``'s 32 hold 64
bits, beyond guessing through a page that answers each try in milliseconds; "abc" is not."""


@dataclass(frozen=True, slots=True)
class WebSettings:
    """Where the web page listens, who may use it, and what it keeps; variables
    ``BOT_WEB_<FIELD>``."""

    # Interface to bind. Anything but loopback (127.0.0.1, ::1, localhost) lets others ask the
    # bot and spend its Sarvam quota, so a token is then required (the dashboard's rule).
    host: str = "127.0.0.1"
    # 8082: next to the dashboard's 8081 and the WhatsApp webhook's 8080.
    port: int = bounded(8082, 0, 65535)
    # Access token, at least MIN_TOKEN_CHARS characters: ``?token=<token>`` once (then an
    # HttpOnly cookie carries an HMAC of it) or ``Authorization: Bearer <token>``. Required
    # when ``host`` is not loopback.
    token: str = wire_text("")
    # Largest recorded voice note accepted, in MB: a minute of browser Opus (MediaRecorder,
    # ~32 kbit/s) is ~0.25 MB, so 5 MB holds far more than ``BOT_MAX_VOICE_S`` of speech.
    max_upload_mb: float = bounded(5.0, 0.01, 100.0)
    # Exchanges (question and reply) kept per browser session, oldest deleted from the
    # database when a new one comes.
    history: int = bounded(30, 1, 1000)
    # Days an exchange is kept after its last change (answer, spoken reply); older ones are
    # deleted at start and every hour (storage.web_exchanges). 30 days: a conversation
    # returned to within a month is still there; the decision log keeps every question anyway.
    keep_days: float = bounded(30.0, 0.01, 3650.0)
    # Behind a proxy that sets X-Forwarded-For (deploy/nginx.conf.j2): a client's address,
    # which the new-sessions limit counts, is that header's last entry, the one the proxy
    # added. Only behind such a proxy: without one a client could name any address.
    trust_proxy: bool = False
    # Folder of the Noto web fonts served for Devanagari, Gujarati and Telugu (Debian's
    # fonts-noto-core; bot.web.assets).
    fonts_dir: Path = DEFAULT_FONTS_DIR

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, host: str | None = None,
                 port: int | None = None) -> WebSettings:
        """Read ``BOT_WEB_*``; ``host`` and ``port`` (the command line's) replace theirs.

        Raises:
            SettingsError: a malformed value, naming the variable.
        """
        try:
            read = settings_from_env(cls, os.environ if env is None else env, "BOT_WEB_")
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        return replace(read, host=read.host if host is None else host,
                       port=read.port if port is None else port)

    @property
    def is_loopback(self) -> bool:
        """Whether ``host`` binds to this machine only."""
        return is_loopback_host(self.host)

    def start_problem(self) -> str | None:
        """Why these settings must not start, or None: a token shorter than
        ``MIN_TOKEN_CHARS``, or bound beyond loopback without a token."""
        if self.token and len(self.token) < MIN_TOKEN_CHARS:
            return (f"BOT_WEB_TOKEN is {len(self.token)} characters: use at least "
                    f"{MIN_TOKEN_CHARS} (e.g. $(openssl rand -hex 16)), so that it cannot be "
                    "guessed")
        if self.is_loopback or self.token:
            return None
        return (f"the web page would be reachable beyond this machine (host {self.host}) "
                "with no token: set BOT_WEB_TOKEN (e.g. $(openssl rand -hex 16)), or bind to "
                "127.0.0.1")
