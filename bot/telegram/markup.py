"""Telegram's markup: the chat layer's :class:`~bot.chat.render.Text` as ``parse_mode="HTML"``
(:data:`HTML`), cut into messages of at most ``TELEGRAM_TEXT_LIMIT`` characters with balanced
tags (:func:`split_message`). Pure: no network.

Every piece of text goes through ``html.escape``; the only markup is ``<b>``, ``<i>`` and
``<code>``.
"""

from __future__ import annotations

import re
from html import escape

from bot.chat.render import Markup, Text

TELEGRAM_TEXT_LIMIT = 4096
"""Characters per message (Telegram counts after entity parsing; raw HTML is longer, so safe)."""

HTML = Markup(escape, "<b>{}</b>".format, "<i>{}</i>".format, "<code>{}</code>".format)
"""Telegram's ``parse_mode="HTML"``."""

_UNIT_RE = re.compile(r"<[^<>]+>|&#?[A-Za-z0-9]+;|.", re.DOTALL)
_TAG_RE = re.compile(r"<[^<>]+>")
_TAG_NAME_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)")


def to_html(text: Text) -> list[str]:
    """``text`` as Telegram HTML messages, each at most ``TELEGRAM_TEXT_LIMIT`` characters."""
    return split_message(HTML.render(text))



def split_message(html: str, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """Split Telegram HTML into chunks of at most ``limit`` characters.

    Cuts preferably at a paragraph break (blank line), then a line break, then a space, and
    only as a last resort between two characters; never inside a tag or an entity such as
    ``&amp;``. Tags open at a cut are closed at the end of the chunk and reopened at the start
    of the next, so every chunk is valid HTML on its own. Whitespace at the cut is dropped.

    Returns:
        Non-empty chunks, in order (``[]`` for blank input).
    Raises:
        ValueError: ``limit`` too small to hold the open tags plus one character.
    """
    units = _UNIT_RE.findall(html)
    chunks: list[str] = []
    stack: list[tuple[str, str]] = []  # (name, opening tag) open at the start of the chunk
    i = 0
    while i < len(units):
        while i < len(units) and units[i].isspace():
            i += 1
        if i == len(units):
            break
        prefix = "".join(raw for _, raw in stack)
        length = len(prefix)
        current = list(stack)
        breaks: dict[int, tuple[int, list[tuple[str, str]]]] = {}  # priority -> (cut, stack)
        j = i
        while j < len(units):
            after = _apply(current, units[j])
            closing = sum(len(name) + 3 for name, _ in after)
            if length + len(units[j]) + closing > limit:
                break
            length += len(units[j])
            current = after
            j += 1
            priority = _break_priority(units, j)
            if priority:
                breaks[priority] = (j, list(current))
        if j == len(units):
            cut, end_stack = j, current
        elif j == i:
            raise ValueError(f"limit {limit} cannot hold the open tags plus one character")
        else:
            cut, end_stack = _choose_break(breaks, i, j, current)
        body = "".join(units[i:cut]).rstrip()
        closing_tags = "".join(f"</{name}>" for name, _ in reversed(end_stack))
        chunk = prefix + body + closing_tags
        if _TAG_RE.sub("", chunk).strip():  # Telegram refuses a message with no text
            chunks.append(chunk)
        stack, i = end_stack, cut
    return chunks


def _apply(stack: list[tuple[str, str]], unit: str) -> list[tuple[str, str]]:
    """The open-tag stack after ``unit`` (tags are assumed well nested, as html.escape'd
    text with our own markup is)."""
    if not (unit.startswith("<") and unit.endswith(">") and len(unit) > 2):
        return stack
    match = _TAG_NAME_RE.match(unit)
    if match is None:
        return stack
    closing, name = match.group(1) == "/", match.group(2).lower()
    if not closing:
        return [*stack, (name, unit)]
    if stack and stack[-1][0] == name:
        return stack[:-1]
    return stack


def _break_priority(units: list[str], j: int) -> int:
    """How good a cut before ``units[j]`` is: 3 paragraph, 2 line, 1 space, 0 none."""
    last = units[j - 1]
    if last == "\n":
        return 3 if j >= 2 and units[j - 2] == "\n" else 2
    return 1 if last.isspace() else 0


def _choose_break(
    breaks: dict[int, tuple[int, list[tuple[str, str]]]], start: int, end: int,
    current: list[tuple[str, str]],
) -> tuple[int, list[tuple[str, str]]]:
    """The best cut: the strongest break that keeps the chunk at least half full, else the
    latest break of any kind, else a hard cut at ``end``."""
    half = start + (end - start) // 2
    for priority in (3, 2, 1):
        if priority in breaks and breaks[priority][0] >= half:
            return breaks[priority]
    if breaks:
        return max(breaks.values(), key=lambda b: b[0])
    return end, current
