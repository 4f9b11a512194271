"""Acceptance demo: the real ``python -m bot`` answers a Hindi voice note through local servers.

Starts the fake Telegram Bot API server (``python -m standins.telegram``, with its control API)
and the Sarvam stand-in (``python -m standins.sarvam``, scripted with the note's transcript),
then ``python -m bot`` pointed at both; pushes a Hindi voice note asking about a passage of the
shared sample ("छोटे खीरे में कैलोरी की मात्रा", calories in a small cucumber) and then
``/why``; prints both replies as Telegram would show them, and the spoken reply the bot sends
after the text (Sarvam text-to-speech, here the stand-in's espeak-ng voice, as OGG/Opus: saved
to a file and checked with ffprobe); shuts everything down.

    python scripts/dev_bot.py                  # index: VOICE_RAG_INDEX_DIR or data/index
    python scripts/dev_bot.py --keep           # leave the servers and bot running (Ctrl-C)

Needs espeak-ng and ffmpeg (for the voice note) and a built index (``python -m ragtools
build-index``). Exit code 0 when the answer is in Devanagari with a citation, a voice note
of OGG/Opus follows it, and /why shows the chain.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from standins.telegram import DEFAULT_TOKEN, parse_html  # noqa: E402
from standins.voice_notes import make_voice_note  # noqa: E402

QUESTION_HI = "छोटे खीरे में कैलोरी की मात्रा"
CHAT_ID = 42
SARVAM_KEY = "dev-key"
READY_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(name: str, args: list[str], env: dict[str, str], log_dir: Path) -> subprocess.Popen:
    log = (log_dir / f"{name}.log").open("wb")
    print(f"starting {name}: {' '.join(args)} (log {log.name})", flush=True)
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def wait_for(client: httpx.Client, method: str, timeout_s: float) -> list[dict]:
    """The next call of ``method`` the fake Telegram server records (control API)."""
    response = client.get("/_control/wait", params={"method": method, "timeout": timeout_s},
                          timeout=timeout_s + 5)
    response.raise_for_status()
    return response.json()


def wait_ready(client: httpx.Client, bot: subprocess.Popen, log_path: Path) -> None:
    """Until the bot starts polling (deleteWebhook); exits with its log if it stops first."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        response = client.get("/_control/wait", params={"method": "deleteWebhook",
                                                         "timeout": 1}, timeout=10)
        if response.status_code == 200:
            return
        if bot.poll() is not None:
            sys.exit(f"python -m bot exited with {bot.returncode}:\n{log_path.read_text()}")
    sys.exit(f"python -m bot not polling after {READY_TIMEOUT_S} s; log: {log_path}")


def wait_listening(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s} s")


def wait_traced(db_path: Path, stage: str, timeout_s: float = 10) -> None:
    """Until the last decision's trace has ``stage`` (the bot adds the voice stages to it just
    after sendVoice returns), or ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with sqlite3.connect(db_path) as conn:
            row = conn.execute("SELECT trace FROM decisions ORDER BY id DESC LIMIT 1").fetchone()
        if row and any(s["name"] == stage for s in json.loads(row[0])):
            return
        time.sleep(0.05)


def probe(path: Path) -> tuple[str, float]:
    """(``format/codec``, duration in seconds) of an audio file, as ffprobe reads it."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-show_streams", "-of",
                          "json", str(path)], capture_output=True, check=True).stdout
    info = json.loads(out)
    return (f"{info['format']['format_name']}/{info['streams'][0]['codec_name']}",
            float(info["format"]["duration"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep everything running at the end")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="voice-rag-dev-"))
    note = make_voice_note(QUESTION_HI, "hi")
    transcripts = work / "transcripts.json"
    # The stand-in cannot recognise speech: it answers every upload with the note's transcript.
    transcripts.write_text(json.dumps({"default": {
        "transcript": QUESTION_HI, "language_code": "hi-IN"}}, ensure_ascii=False), "utf-8")

    tg_port, sarvam_port = free_port(), free_port()
    tg_url = f"http://127.0.0.1:{tg_port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bot_env = env | {
        "TELEGRAM_TOKEN": DEFAULT_TOKEN, "TELEGRAM_API_BASE": f"{tg_url}/bot",
        "TELEGRAM_FILE_BASE": f"{tg_url}/file/bot", "TELEGRAM_POLL_TIMEOUT_S": "2",
        "SARVAM_API_KEY": SARVAM_KEY, "SARVAM_BASE_URL": f"http://127.0.0.1:{sarvam_port}",
        "BOT_DB_PATH": os.environ.get("BOT_DB_PATH", str(work / "bot.sqlite3")),
    }
    procs = [
        start("telegram", ["-m", "standins.telegram", "--port", str(tg_port)], env, work),
        start("sarvam", ["-m", "standins.sarvam", "--port", str(sarvam_port), "--api-key",
                         SARVAM_KEY, "--transcripts", str(transcripts)], env, work),
    ]
    ok = False
    try:
        wait_listening(tg_port)
        wait_listening(sarvam_port)
        procs.append(start("bot", ["-m", "bot"], bot_env, work))
        client = httpx.Client(base_url=tg_url)
        started = time.perf_counter()
        wait_ready(client, procs[-1], work / "bot.log")
        print(f"bot polling after {time.perf_counter() - started:.1f} s", flush=True)

        sent = time.perf_counter()
        client.post("/_control/push_voice", params={"chat_id": CHAT_ID, "duration": 3},
                    content=note).raise_for_status()
        [answer] = wait_for(client, "sendMessage", 60)
        answer_text = parse_html(answer["params"]["text"])
        print(f"\n--- reply to the Hindi voice note ({(time.perf_counter() - sent) * 1000:.0f} "
              f"ms) ---\n{answer_text}\n", flush=True)
        [voice] = wait_for(client, "sendVoice", 60)
        voice_path = work / "voice-reply.ogg"
        voice_path.write_bytes(client.get("/_control/sent_file",
                                          params={"method": "sendVoice"}).content)
        codec, duration_s = probe(voice_path)
        print(f"--- voice reply ({(voice['at'] - answer['at']) * 1000:.0f} ms after the text) "
              f"---\n{voice_path}: {codec}, {duration_s:.1f} s, {voice_path.stat().st_size} "
              f"bytes (sendVoice duration={voice['params'].get('duration')})\n", flush=True)

        wait_traced(Path(bot_env["BOT_DB_PATH"]), "send_voice")  # recorded after sendVoice
        client.post("/_control/push_text", json={"chat_id": CHAT_ID, "text": "/why"})
        [why] = wait_for(client, "sendMessage", 30)
        why_text = parse_html(why["params"]["text"])
        print(f"--- /why ---\n{why_text}\n", flush=True)

        ok = (answer_text.startswith(f"आपने कहा: {QUESTION_HI}")
              and re.search(r"hi-\d+-\d+", answer_text) is not None
              and codec == "ogg/opus" and duration_s > 0.5
              and "relevance_guard — passed" in why_text and "text_to_speech — ok" in why_text)
        print("OK: Devanagari answer with a citation, then an OGG/Opus voice note; /why shows "
              "the chain" if ok
              else f"FAILED: unexpected replies (logs in {work})", flush=True)
        if args.keep:
            print(f"running; fake Telegram control API at {tg_url}/_control/ (Ctrl-C stops)")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if ok and not args.keep:  # a failed or kept run leaves its logs for reading
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
