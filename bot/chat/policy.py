"""What may differ between channels, decided here once: who may use the bot (allow-list), how
large a voice note the channel lets the bot fetch, and whether it can deliver voice notes.

Each front end describes itself with one :class:`ChannelPolicy` and registers it on the
:class:`~bot.chat.services.Services` (``services.channels[name] = policy``); the chat layer
reads it for every message (``services.policy(asker.channel)``). A front end never applies
these rules itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChannelPolicy:
    """One channel's rules.

    ``name``: the channel (``telegram``, ``whatsapp``, ``console``), as stored with every row.
    ``allowed_ids``: sender ids (``Asker.user_id``: Telegram user ids, WhatsApp numbers) allowed
    to use the bot; empty: everyone. A stranger's messages count against the rate limit like
    any other, so at most the limit's number of "this bot is private" replies go out.
    ``max_voice_bytes``: the largest voice note the channel lets the bot download (Telegram's
    Bot API: 20 MB; WhatsApp: ``WHATSAPP_MAX_MEDIA_MB``); None: no limit (a local file).
    ``can_speak``: the channel delivers voice notes (``/voice`` replies).
    """

    name: str
    allowed_ids: frozenset[int] = frozenset()
    max_voice_bytes: int | None = None
    can_speak: bool = True

    def admits(self, user_id: int | None) -> bool:
        """Whether a message from ``user_id`` may be answered (always without an allow-list)."""
        return not self.allowed_ids or (user_id is not None and user_id in self.allowed_ids)
