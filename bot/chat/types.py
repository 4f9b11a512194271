"""The plain data every channel turns its input into, and the reply every channel delivers.

A front end (``bot.telegram``, ``bot.whatsapp``, ``bot.terminal``) builds an :class:`Asker` and,
for audio, a :class:`VoiceNote`; the chat layer answers with a :class:`Reply` whose text is
channel-neutral (:class:`bot.chat.render.Text`), so each front end writes it in its own markup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.chat.render import Text
from rag.language import normalise_language
from rag.types import Status


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asked: ``channel`` (the front end: ``telegram``, ``whatsapp``, ``console``) and
    ``chat_id`` (where to answer and whose settings apply: chats are keyed by both), ``user_id``,
    ``message_id`` (what to reply to; None where the channel has no numeric one),
    ``language_code``, the user's interface language as the channel reports it (``hi``,
    ``en-US``; None if unknown), ``sender_chat_id``, the chat a message was sent on behalf of
    (Telegram's anonymous group admins and channels: ``user_id`` is then a shared placeholder),
    ``forwarded_from`` for a forwarded message (``user 42 at 2026-12-01T01:02:03Z``, ...; None
    when it was not forwarded), ``replied_to``, the id of the bot's own message this one replies
    to (None when it replies to none), ``is_private`` (a one-to-one chat: a stranger there is
    told the bot is private; in a group, nothing), and ``message_key``, the channel's own id of
    the message as text where it has no numeric one (WhatsApp's ``wamid``), so a message taken
    over by another replica is known as the same one."""

    channel: str
    chat_id: int
    user_id: int | None = None
    message_id: int | None = None
    language_code: str | None = None
    sender_chat_id: int | None = None
    forwarded_from: str | None = None
    replied_to: int | None = None
    is_private: bool = True
    message_key: str | None = None

    @property
    def sender_id(self) -> int | None:
        """Whose rate limit a message counts against: the sender chat when there is one (all
        anonymous admins share one placeholder user), else the user."""
        return self.sender_chat_id if self.sender_chat_id is not None else self.user_id

    @property
    def interface_lang(self) -> str | None:
        """``language_code`` as a corpus language (``en``/``hi``/``gu``/``te``), else None."""
        try:
            return normalise_language(self.language_code)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class VoiceNote:
    """A voice note before download: ``file_size`` in bytes and ``duration_s`` in seconds as the
    sender advertised them (None if not given); ``fetch()`` downloads the encoded audio and
    raises ``bot.errors.VoiceDownloadError`` when the channel refuses (e.g. file too big)."""

    file_size: int | None
    duration_s: float | None
    fetch: Callable[[], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class Speech:
    """What a spoken reply says: plain ``text`` (no citations, ids or scores) in ``lang``
    (``en``/``hi``/``gu``/``te``)."""

    text: str
    lang: str


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send back: channel-neutral messages in order (each front end writes them in its
    markup and splits them at its own length limit), the id of the decision recorded for it
    (None for commands), and what to say in a voice note after them (None: no spoken reply;
    see ``bot.chat.voice_reply``). ``status`` is that decision's outcome (None without a
    decision) and ``lang`` the language the messages are written in (``en``/``hi``/``gu``/
    ``te``; None for no message), so a front end labels the reply without reading the decision
    back."""

    messages: list[Text] = field(default_factory=list)
    decision_id: int | None = None
    speech: Speech | None = None
    status: Status | None = None
    lang: str | None = None


def ui_language(chat_lang: str, asker: Asker, fallback: str | None = None) -> str:
    """Language for messages that are not an answer: the chat's ``/lang`` choice, else
    ``fallback`` (e.g. the script of what the user typed), else the user's interface language,
    else English."""
    if chat_lang != "auto":
        return chat_lang
    return fallback or asker.interface_lang or "en"

