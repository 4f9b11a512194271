"""The web channel's settings: environment variables ``BOT_WEB_<FIELD>``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from bot.errors import SettingsError
from bot.settings import is_loopback_host
from rag.settings import bounded, settings_from_env, wire_text


@dataclass(frozen=True, slots=True)
class WebSettings:
    """Where the web page listens and who may use it; variables ``BOT_WEB_<FIELD>``."""

    # Interface to bind. Anything but loopback (127.0.0.1, ::1, localhost) lets others ask the
    # bot and spend its Sarvam quota, so a token is then required (the dashboard's rule).
    host: str = "127.0.0.1"
    # 8082: next to the dashboard's 8081 and the WhatsApp webhook's 8080.
    port: int = bounded(8082, 0, 65535)
    # Access token: ``?token=<token>`` once (then an HttpOnly cookie carries an HMAC of it) or
    # ``Authorization: Bearer <token>``. Required when ``host`` is not loopback.
    token: str = wire_text("")
    # Largest recorded voice note accepted, in MB: a minute of browser Opus (MediaRecorder,
    # ~32 kbit/s) is ~0.25 MB, so 5 MB holds far more than ``BOT_MAX_VOICE_S`` of speech.
    max_upload_mb: float = bounded(5.0, 0.01, 100.0)
    # Exchanges (question and reply) kept per browser session for the page, oldest dropped.
    history: int = bounded(30, 1, 1000)
    # Browser sessions kept in memory, least recently used dropped: with ``history`` 30 and a
    # spoken reply of ~50 KB each at worst, 1,000 sessions stay well under 2 GB; typically far
    # less (text only).
    max_sessions: int = bounded(1000, 1, 100_000)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WebSettings:
        """Read ``BOT_WEB_*``.

        Raises:
            SettingsError: a malformed value, naming the variable.
        """
        try:
            return settings_from_env(cls, os.environ if env is None else env, "BOT_WEB_")
        except ValueError as exc:
            raise SettingsError(str(exc)) from None

    @property
    def is_loopback(self) -> bool:
        """Whether ``host`` binds to this machine only."""
        return is_loopback_host(self.host)

    def exposure_problem(self) -> str | None:
        """Why these settings must not start (bound beyond loopback without a token), or None."""
        if self.is_loopback or self.token:
            return None
        return (f"the web page would be reachable beyond this machine (BOT_WEB_HOST={self.host}) "
                "with no token: set BOT_WEB_TOKEN (e.g. $(openssl rand -hex 16)), or bind to "
                "127.0.0.1")
