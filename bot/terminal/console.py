"""Chat with the bot in a terminal, no Telegram token needed: the same service functions the
Telegram handlers call, on the local index and the SQLite decision log.

    python -m bot.terminal.console            # or: python -m bot --console
    > How much does an Xbox 360 cost?
    > /why
    > /lang hi
    > /voice on                      # answers also spoken: the audio is written to a file
    > path/to/voice-note.ogg         # any audio file ffmpeg reads; needs SARVAM_API_KEY
    > /quit

A line naming a regular file is sent as a voice note (one level of shell quoting is removed
first, as a terminal's drag and drop writes ``'/tmp/x.ogg'`` or ``/tmp/my\\ note.ogg``; see
:func:`file_name`); a file that cannot be read gets "could not read this audio"; a line that
looks like a path (see :func:`looks_like_path`) but names no readable file gets "no audio
file"; an unknown ``/command`` gets "unknown command"; every other line is a typed question.

A spoken reply (``/voice on``, or ``auto`` for an audio file; needs ``SARVAM_API_KEY``) is
written as OGG/Opus to ``voice-replies/`` beside ``BOT_DB_PATH`` and its path printed.

Questions and the ``/lang``, ``/mode`` and ``/voice`` choices are recorded under channel
``console``, chat id 0 (``CONSOLE_CHAT_ID``) in ``BOT_DB_PATH``, so the choices carry over to
later sessions; each session starts by saying which are in force and where they are stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterable, Callable
from functools import partial
from pathlib import Path
from typing import Literal

from bot.chat.audio import AudioError
from bot.chat.commands import (
    answer_command,
    command_reply,
    lang_line,
    mode_line,
    notice_reply,
    parse_command,
    voice_line,
)
from bot.chat.context import load_context
from bot.chat.delivery import DeliveryError, OnWire, deliver
from bot.chat.questions import answer_text, answer_voice
from bot.chat.render import PLAIN, Text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply, VoiceNote
from bot.chat.voice_cache import VoiceAudio
from bot.settings import Settings

CHANNEL = "console"
"""This channel's name, as stored with every row."""
CONSOLE_CHAT_ID = 0
"""Chat id of the console's decisions and settings."""
AUDIO_SUFFIXES = frozenset({".aac", ".amr", ".flac", ".m4a", ".mp3", ".oga", ".ogg", ".opus",
                            ".wav", ".webm"})
"""File name endings that mark a console line as meant to be an audio file."""


async def handle_line(services: Services, asker: Asker, line: str) -> Reply | None:
    """One console input: a command, a path to an audio file, or a typed question.

    Returns None for a blank line.
    """
    line = line.strip()
    if not line:
        return None
    command = parse_command(line)
    if command is not None:
        reply = await command_reply(services, asker, command.name, command.arg)
        if reply is not None:
            return reply
    name = file_name(line)
    path = _readable_file(name)
    if path is not None:
        note = VoiceNote(path.stat().st_size, None, fetch=partial(asyncio.to_thread,
                                                                  _read_audio, path))
        return await answer_voice(services, asker, note)
    if looks_like_path(name):
        return await notice_reply(services, asker, "no_audio_file", path=name)
    if command is not None:
        return await answer_command(services, asker, command)
    return await answer_text(services, asker, line)


def file_name(line: str) -> str:
    """The file name ``line`` stands for: ``line`` with one level of shell quoting and escapes
    removed, as a terminal's drag and drop writes a path (``'/tmp/x.ogg'``,
    ``"/tmp/my note.ogg"``, ``/tmp/my\\ note.ogg``); ``line`` itself when it has no quotes or
    backslashes, names something as typed, or is not exactly one shell word."""
    if not any(ch in line for ch in "'\"\\") or _exists(line):
        return line
    try:
        words = shlex.split(line)
    except ValueError:  # an unclosed quote: "What's an Xbox?"
        return line
    return words[0] if len(words) == 1 else line


def _exists(line: str) -> bool:
    """``line``, as typed, names something that exists; False for lines that cannot name a
    file (a name over 255 bytes, ``~user`` with no such user)."""
    try:
        return Path(line).expanduser().exists()
    except (OSError, RuntimeError):
        return False


def _read_audio(path: Path) -> bytes:
    """The file's bytes.

    Raises:
        AudioError: the read failed (e.g. EIO on ``/proc/self/mem``, the file removed since),
            so the user gets the "could not read this audio" answer.
    """
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AudioError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _readable_file(line: str) -> Path | None:
    """The readable regular file ``line`` names, else None; also None for lines that cannot
    name a file (a name over 255 bytes, ``~user`` with no such user)."""
    try:
        path = Path(line).expanduser()
        return path if path.is_file() and os.access(path, os.R_OK) else None
    except (OSError, RuntimeError):  # ENAMETOOLONG; expanduser: "Could not determine home"
        return None


def looks_like_path(line: str) -> bool:
    """True when ``line`` is meant as a file rather than a question: it starts with ``/``,
    ``~`` or ``.`` or has a ``/`` in it, and names something that exists (a folder,
    ``/dev/null``); or it starts with ``/``, ``~`` or ``.`` and ends in an audio suffix
    (:data:`AUDIO_SUFFIXES`) or has a ``/`` after its first character (``/tmp/x``, ``./x``)."""
    starts_like_path = line.startswith(("/", "~", "."))
    if not starts_like_path and "/" not in line:
        return False
    if _exists(line):
        return True
    first_word = line.split()[0]
    return starts_like_path and ("/" in first_word[1:]
                                 or line.lower().endswith(tuple(AUDIO_SUFFIXES)))


async def banner(services: Services, asker: Asker) -> str:
    """The console's first message: where its settings are stored, and the answer language,
    mode and spoken replies in force (set by ``/lang``, ``/mode`` and ``/voice`` in this or an
    earlier session)."""
    ctx = await load_context(services, asker)
    chat, ui = ctx.chat, ctx.ui
    return "\n".join([
        f"Console chat: settings of chat id {asker.chat_id} in {services.settings.bot.db_path}, "
        "kept between sessions (/lang, /mode and /voice change them; /help lists the commands, "
        "/quit leaves).",
        lang_line(chat.lang, ui),
        mode_line(chat.mode, ui, has_llm_key=bool(services.settings.openrouter.api_key)),
        voice_line(chat.voice, ui, services),
    ])


class ConsoleOutbox:
    """How replies leave in a terminal (the chat layer's ``Outbox``): plain text to ``write``,
    one message per call; a voice note written as OGG/Opus to ``voice-replies/`` beside the
    database, its path printed."""

    def __init__(self, write: Callable[[str], None], voice_dir: Path) -> None:
        self.write, self.voice_dir = write, voice_dir
        self.n_voice = 0

    async def send_text(self, asker: Asker, texts: list[Text], on_wire: OnWire) -> list[int]:
        for text in texts:
            self.write(PLAIN.render(text))
        return []

    async def send_voice(self, asker: Asker, audio: VoiceAudio, on_wire: OnWire) -> str:
        self.n_voice += 1
        target = self.voice_dir / f"reply-{os.getpid()}-{self.n_voice}.ogg"
        try:
            await asyncio.to_thread(_write_file, target, audio.ogg)
        except OSError as exc:
            raise DeliveryError("write_failed",
                                f"cannot write {target}: {exc.strerror or exc}") from exc
        self.write(f"(voice reply: {target})")
        return str(target)

    def busy(self, asker: Asker,
             activity: Literal["typing", "recording"]) -> contextlib.nullcontext:
        return contextlib.nullcontext()


async def chat(services: Services, lines: AsyncIterable[str],
               write: Callable[[str], None]) -> None:
    """Say which settings are in force (:func:`banner`), then answer each line until the input
    ends or ``/quit``; replies go to ``write`` as plain text, one message per call."""
    asker = Asker(CHANNEL, CONSOLE_CHAT_ID, user_id=None)
    outbox = ConsoleOutbox(write, services.settings.bot.db_path.parent / "voice-replies")
    write(await banner(services, asker))
    async for line in lines:
        if line.strip().lower() in ("/quit", "/exit"):
            return
        reply = await handle_line(services, asker, line)
        if reply is not None:
            await deliver(services, outbox, asker, reply)


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


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

