"""Errors of the bot layer (front ends, audio, settings, start-up), under one base.

The core's errors are ``rag.errors.RagError``, storage's ``storage.errors.StorageError``. What a
user reads is never ``str(err)``: the edge that catches an error (a service function, a front
end, ``python -m bot``'s start-up) chooses the words of ``bot.chat.messages`` in the user's
language; ``str(err)`` goes to the log, the trace and an operator's terminal.
"""

from __future__ import annotations


class BotError(Exception):
    """Base class of the bot layer's errors; ``str(err)`` is for the log and the operator."""


class StartupError(BotError):
    """The bot cannot start; ``str(err)`` says why and how to fix it (printed as one line by
    ``python -m bot``, which exits 2)."""


class SettingsError(StartupError, ValueError):
    """An environment variable holds a malformed value; ``str(err)`` names the variable and
    what it must be (e.g. ``BOT_MAX_VOICE_S must be an integer, got '2m'``). A ``ValueError``
    too, as the settings readers of ``rag.settings`` raise."""


class VoiceDownloadError(BotError):
    """A voice note's ``fetch()`` failed (raised by the Telegram handlers' and WhatsApp's
    download): ``is_too_big`` when the server refused the file for its size (Telegram's 20 MB
    limit for bots); ``str(err)`` says what the server answered; ``max_mb``, the front end's
    limit in MB when it is not Telegram's 20 (WhatsApp: ``WHATSAPP_MAX_MEDIA_MB``)."""

    def __init__(self, detail: str, *, is_too_big: bool = False,
                 max_mb: float | None = None) -> None:
        super().__init__(detail)
        self.is_too_big, self.max_mb = is_too_big, max_mb
