"""WhatsApp's markup: the chat layer's :class:`~bot.chat.render.Text` as WhatsApp formatting
(``*bold*``, ``_italic_``, ```` ```code``` ````; no escaping exists), cut into messages of at
most ``WHATSAPP_TEXT_LIMIT`` characters. Pure: no network."""

from __future__ import annotations

from bot.chat.render import Markup, Text

WHATSAPP_TEXT_LIMIT = 4096
"""Characters per text message body (Cloud API reference, "Text object": body max 4096)."""

WHATSAPP = Markup(str, "*{}*".format, "_{}_".format, "```{}```".format)
"""WhatsApp's text formatting."""


def to_whatsapp(text: Text) -> list[str]:
    """``text`` as WhatsApp message bodies, each at most ``WHATSAPP_TEXT_LIMIT`` characters."""
    return split_text(WHATSAPP.render(text))


def split_text(text: str, limit: int = WHATSAPP_TEXT_LIMIT) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at the last paragraph break,
    else line break, else space in the second half of each piece, else at ``limit``."""
    pieces = []
    while len(text) > limit:
        for sep in ("\n\n", "\n", " "):
            cut = text.rfind(sep, limit // 2, limit)
            if cut > 0:
                break
        else:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text.strip():
        pieces.append(text)
    return pieces
