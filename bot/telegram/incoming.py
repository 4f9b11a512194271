"""Pure helpers that turn Telegram messages into the chat layer's plain data (``bot.chat.types``).

No network and no bot: testable on ``telegram.Message`` objects built by hand.
"""

from __future__ import annotations

from telegram import Message, MessageEntity
from telegram.constants import ChatType

from bot.chat.types import Asker

CHANNEL = "telegram"
"""This channel's name, as stored with every row."""


def asker_of(message: Message, bot_id: int | None = None) -> Asker:
    """Chat, user, message id, the user's interface language of ``message``, whether the chat is
    private, and (given the bot's ``bot_id``) the bot's message it replies to."""
    user = message.from_user
    return Asker(
        channel=CHANNEL,
        chat_id=message.chat_id,
        user_id=user.id if user else None,
        message_id=message.message_id,
        language_code=user.language_code if user else None,
        sender_chat_id=message.sender_chat.id if message.sender_chat else None,
        forwarded_from=forward_origin(message),
        replied_to=message.reply_to_message.message_id
        if bot_id is not None and is_reply_to_bot(message, bot_id) else None,
        is_private=is_private(message),
    )


def forward_origin(message: Message) -> str | None:
    """Where a forwarded message came from, for the decision log: the origin's type (``user``,
    ``hidden_user``, ``chat``, ``channel``), its id when Telegram gives one, and when it was
    first sent (UTC); None for a message that was not forwarded."""
    origin = message.forward_origin
    if origin is None:
        return None
    who = getattr(origin, "sender_user", None) or getattr(origin, "sender_chat", None) \
        or getattr(origin, "chat", None)
    ident = f" {who.id}" if who is not None else ""
    return f"{origin.type}{ident} at {origin.date:%Y-%m-%dT%H:%M:%SZ}"


def is_private(message: Message) -> bool:
    return message.chat.type == ChatType.PRIVATE


def is_reply_to_bot(message: Message, bot_id: int) -> bool:
    replied = message.reply_to_message
    return bool(replied and replied.from_user and replied.from_user.id == bot_id)


def question_text(message: Message, bot_username: str, bot_id: int) -> str | None:
    """The question in a text message, or None when the bot should stay silent.

    In private chats every text is a question. In groups (privacy mode) only a message that
    mentions ``@bot_username`` or replies to the bot is; the mention is removed from the text.
    """
    text = message.text or ""
    if is_private(message) or is_reply_to_bot(message, bot_id) \
            or _mentions(message, bot_username):
        return _without_mention(message, text, bot_username)
    return None


def is_for_bot(message: Message, bot_username: str, bot_id: int) -> bool:
    """Whether a message other than typed text (a voice note, a sticker, an unknown command)
    is addressed to the bot: always in private chats; in groups a reply to the bot, a command
    for it (``/foo@bot_username``) or a message that mentions ``@bot_username`` (in its text or
    caption, e.g. a voice note's)."""
    if is_private(message) or is_reply_to_bot(message, bot_id):
        return True
    text = message.text or ""
    if text.startswith("/") and text.split()[0].partition("@")[2].lower() == bot_username.lower():
        return True
    return _mentions(message, bot_username)


_KINDS = ("sticker", "photo", "video_note", "video", "animation", "document", "audio", "voice",
          "location", "venue", "contact", "poll", "dice", "game", "story", "text")


def message_kind(message: Message) -> str:
    """What ``message`` carries, for logs: ``command``, ``sticker``, ``photo``, ``video_note``,
    ``document``, ... (the first of those it has), else ``other``."""
    if is_command(message):
        return "command"
    return next((kind for kind in _KINDS if getattr(message, kind, None)), "other")


KNOWN_COMMANDS = frozenset({"start", "help", "why", "new", "lang", "mode", "voice"})
"""The commands of the menu (``bot.telegram.app.COMMANDS``)."""


def addresses_command(message: Message, bot_username: str) -> bool:
    """Whether a command is for this bot: ``/cmd@bot_username``, any command in a private chat,
    or one of ``KNOWN_COMMANDS`` without ``@`` in a group (as PTB's ``CommandHandler`` takes
    them); ``/cmd@otherbot`` and unknown commands without ``@`` in groups are not."""
    command, _, target = (message.text or "").split()[0].partition("@")
    if target:
        return target.lower() == bot_username.lower()
    return is_private(message) or command[1:].lower() in KNOWN_COMMANDS


def is_command(message: Message) -> bool:
    """Whether the text starts with a command (``/foo``)."""
    text = message.text or ""
    return text.startswith("/") and len(text.split()[0].split("@")[0]) > 1


def _mentions(message: Message, bot_username: str) -> bool:
    """Whether the text or caption of ``message`` mentions ``@bot_username``."""
    mention = f"@{bot_username}".lower()
    found = [*message.parse_entities([MessageEntity.MENTION]).values(),
             *message.parse_caption_entities([MessageEntity.MENTION]).values()]
    return any(m.lower() == mention for m in found)


def _without_mention(message: Message, text: str, bot_username: str) -> str:
    mention = f"@{bot_username}"
    for value in message.parse_entities([MessageEntity.MENTION]).values():
        if value.lower() == mention.lower():
            text = text.replace(value, " ")
    return " ".join(text.split())
