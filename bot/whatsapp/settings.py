"""The WhatsApp front end's settings: environment variables ``WHATSAPP_<FIELD>``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from bot.errors import SettingsError
from rag.settings import bounded, settings_from_env, wire_text


@dataclass(frozen=True, slots=True)
class WhatsAppSettings:
    """The WhatsApp front end's settings; environment variables ``WHATSAPP_<FIELD>``."""

    # A permanent (System User) access token of the Meta app, sent as a bearer token.
    token: str = wire_text("")
    # The business number's id (WhatsApp Manager > API Setup), not the number itself.
    phone_number_id: str = wire_text("")
    # The Meta app's secret (App settings > Basic): checks X-Hub-Signature-256 of each POST.
    app_secret: str = wire_text("")
    # Any string you choose; Meta echoes it in the webhook's GET verification.
    verify_token: str = wire_text("")
    # Graph API base URL and version; point the URL at ``standins.whatsapp`` for tests.
    api_base: str = wire_text("https://graph.facebook.com")
    api_version: str = wire_text("v21.0")
    listen: str = "0.0.0.0"
    # Port of the webhook server; a PaaS's $PORT is used when this is not set.
    port: int = bounded(8080, 1, 65535)
    webhook_path: str = "/webhook"
    # Largest audio downloaded, in MB: WhatsApp's own limit for audio is 16 MB.
    max_media_mb: float = bounded(16.0, 0.01)
    # Comma-separated wa_ids (numbers with country code, no '+') allowed; empty = everyone.
    allowed_numbers: tuple[str, ...] = ()
    # Graph calls: timeout (s), calls per request in all, back-off base and cap (s) for 429/5xx
    # without Retry-After (1, 2, 4 s: Meta asks clients to back off exponentially).
    timeout_s: float = bounded(20.0, 0.1)
    max_attempts: int = bounded(4, 1)
    backoff_base_s: float = bounded(1.0, 0.0)
    max_backoff_s: float = bounded(60.0, 0.0)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WhatsAppSettings:
        """Read ``WHATSAPP_*`` (and ``$PORT`` when ``WHATSAPP_PORT`` is unset).

        Raises:
            SettingsError: a malformed value, naming the variable.
        """
        env = os.environ if env is None else env
        if env.get("PORT") and not env.get("WHATSAPP_PORT"):
            env = {**env, "WHATSAPP_PORT": env["PORT"]}
        try:
            wa = settings_from_env(cls, env, "WHATSAPP_")
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        numbers = tuple(n.lstrip("+").replace(" ", "") for n in wa.allowed_numbers)
        if any(not n.isdigit() for n in numbers):
            raise SettingsError("WHATSAPP_ALLOWED_NUMBERS must be comma-separated phone numbers "
                                f"with country code, got {env.get('WHATSAPP_ALLOWED_NUMBERS')!r}")
        return cls(**{**{f: getattr(wa, f) for f in cls.__dataclass_fields__},
                      "allowed_numbers": numbers})

    def missing(self) -> str | None:
        """The first required setting not set, as a user message; None when all are."""
        for name in ("token", "phone_number_id", "app_secret", "verify_token"):
            if not getattr(self, name):
                return (f"WHATSAPP_{name.upper()} is not set: see docs/channels.md, 'WhatsApp', "
                        "for where each value comes from")
        return None
