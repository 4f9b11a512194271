"""``python -m bot --web --demo-voice``: try the microphone without a Sarvam account.

Starts the Sarvam stand-in (``python -m standins.sarvam``, its own process on a free loopback
port) with a random key and one scripted transcript, and points the bot's speech-to-text and
text-to-speech at it. Whatever is recorded, the stand-in "hears" :data:`DEMO_TRANSCRIPT` (it
recognises no speech); the spoken reply is espeak-ng's voice (a tone where espeak-ng is
missing). The page says so above the record button. The stand-in stops with the bot.
"""

from __future__ import annotations

import json
import re
import secrets
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from bot.errors import StartupError
from bot.settings import Settings

DEMO_TRANSCRIPT = "छोटे खीरे में कैलोरी की मात्रा"
"""What the stand-in hears in every recording: a Hindi question the sample corpus answers
("calories in small cucumbers"), so the demo shows a Devanagari answer and a spoken reply."""
DEMO_LANGUAGE_CODE = "hi-IN"
START_TIMEOUT_S = 60.0
"""Seconds to wait for the stand-in's ``base_url=`` line (it starts in about a second; a
machine busy loading the bot's index beside it can take many times that)."""
STOP_TIMEOUT_S = 10.0
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class DemoVoice:
    """The running stand-in: ``base_url`` and ``api_key`` for ``SARVAM_*``, and the
    ``transcript`` it returns for every recording."""

    base_url: str
    api_key: str
    transcript: str


@contextmanager
def sarvam_standin(transcript: str = DEMO_TRANSCRIPT,
                   language_code: str = DEMO_LANGUAGE_CODE) -> Iterator[DemoVoice]:
    """The stand-in, running until the block ends (then SIGTERM, SIGKILL after
    ``STOP_TIMEOUT_S``).

    Raises:
        StartupError: it exited or did not listen within ``START_TIMEOUT_S`` (the message
            ends with its log).
    """
    key = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="voice-rag-demo-") as work:
        transcripts = Path(work) / "transcripts.json"
        transcripts.write_text(json.dumps({"default": {
            "transcript": transcript, "language_code": language_code}}, ensure_ascii=False),
            "utf-8")
        log_path = Path(work) / "sarvam.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "standins.sarvam", "--port", "0", "--api-key", key,
                 "--transcripts", str(transcripts)], cwd=ROOT, stdout=subprocess.PIPE,
                stderr=log, text=True)
        try:
            base_url = _wait_listening(process, log_path)
            yield DemoVoice(base_url, key, transcript)
        finally:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def with_demo_voice(settings: Settings, demo: DemoVoice) -> Settings:
    """``settings`` with speech-to-text and text-to-speech through the stand-in ``demo``."""
    return replace(settings, sarvam=replace(settings.sarvam, api_key=demo.api_key,
                                            base_url=demo.base_url))


def _wait_listening(process: subprocess.Popen, log_path: Path) -> str:
    """The stand-in's base URL from its first ``base_url=`` line on stdout."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while (left_s := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([process.stdout], [], [], left_s)
        line = process.stdout.readline() if ready else ""
        if match := re.search(r"base_url=(\S+)", line):
            return match.group(1)
        if not line and process.poll() is not None:
            break
    process.kill()
    raise StartupError(f"the Sarvam stand-in for --demo-voice did not start (exit "
                       f"{process.poll()}): {log_path.read_text(errors='replace')[-1000:]}")
