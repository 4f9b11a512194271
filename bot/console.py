"""Chat with the bot in a terminal, no Telegram token needed: the same service functions the
Telegram handlers call, on the local index and the SQLite decision log.

    python -m bot.console            # or: python -m bot --console
    > How much does an Xbox 360 cost?
    > /why
    > /lang hi
    > path/to/voice-note.ogg         # any audio file ffmpeg reads; needs SARVAM_API_KEY
    > /quit

Questions are recorded under chat id 0 (``CONSOLE_CHAT_ID``).
"""

from __future__ import annotations

import asyncio
import html
import re
import sys
from collections.abc import AsyncIterable, Callable
from functools import partial
from pathlib import Path

from bot.commands import help_reply, lang_reply, mode_reply, why_reply
from bot.questions import answer_text, answer_voice
from bot.services import Asker, Reply, Services, VoiceNote
from bot.settings import Settings

CONSOLE_CHAT_ID = 0
"""Chat id of the console's decisions and settings (Telegram never uses 0)."""

_TAG_RE = re.compile(r"<[^<>]+>")


async def handle_line(services: Services, asker: Asker, line: str) -> Reply | None:
    """One console input: a command, a path to an audio file, or a typed question.

    Returns None for a blank line.
    """
    line = line.strip()
    if not line:
        return None
    command, _, arg = line.partition(" ")
    match command.lower():
        case "/start" | "/help":
            return await help_reply(services, asker)
        case "/why":
            return await why_reply(services, asker)
        case "/lang":
            return await lang_reply(services, asker, arg or None)
        case "/mode":
            return await mode_reply(services, asker, arg or None)
    path = _existing_file(line)
    if path is not None:
        note = VoiceNote(path.stat().st_size, None, fetch=partial(asyncio.to_thread,
                                                                  path.read_bytes))
        return await answer_voice(services, asker, note)
    return await answer_text(services, asker, line)


def _existing_file(line: str) -> Path | None:
    """The regular file ``line`` names, else None; also None for lines that cannot name a file
    (a name over 255 bytes, ``~user`` with no such user), which are questions."""
    try:
        path = Path(line).expanduser()
        return path if path.is_file() else None
    except (OSError, RuntimeError):  # ENAMETOOLONG; expanduser: "Could not determine home"
        return None


def to_plain(message: str) -> str:
    """Telegram HTML as terminal text: tags dropped, entities decoded."""
    return html.unescape(_TAG_RE.sub("", message))


async def chat(services: Services, lines: AsyncIterable[str],
               write: Callable[[str], None]) -> None:
    """Answer each line until the input ends or ``/quit``; replies go to ``write`` as plain
    text, one message per call."""
    asker = Asker(CONSOLE_CHAT_ID, user_id=None)
    async for line in lines:
        if line.strip().lower() in ("/quit", "/exit"):
            return
        reply = await handle_line(services, asker, line)
        for message in reply.messages if reply else []:
            write(to_plain(message))


async def _stdin_lines() -> AsyncIterable[str]:
    while True:
        if sys.stdin.isatty():
            print("> ", end="", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return
        yield line


async def _main(settings: Settings) -> None:
    services = await Services.open(settings)
    try:
        await chat(services, _stdin_lines(), lambda text: print(text + "\n", flush=True))
    finally:
        await services.close()


def run_console(settings: Settings) -> int:
    """Run the console chat until end of input; returns the exit code."""
    asyncio.run(_main(settings))
    return 0


if __name__ == "__main__":
    from bot.app import main

    sys.exit(main(["--console", *sys.argv[1:]]))
