"""Acceptance demo: the real ``python -m bot --whatsapp`` answers a Hindi WhatsApp voice note.

Starts the Graph API stand-in (``standins.whatsapp.FakeGraph``, in this process) and the Sarvam
stand-in (``python -m standins.sarvam``, scripted with the note's transcript), then
``python -m bot --whatsapp`` pointed at both; POSTs a signed webhook carrying a Hindi voice
note ("छोटे खीरे में कैलोरी की मात्रा", calories in a small cucumber; real speech from
espeak-ng as OGG/Opus, served by the stand-in's media endpoints), then a signed ``why``; prints
both replies as WhatsApp would show their text, and the spoken reply sent after the answer
(Sarvam text-to-speech, here the stand-in's espeak-ng voice, uploaded as OGG/Opus); shuts
everything down.

    python scripts/dev_whatsapp.py             # index: VOICE_RAG_INDEX_DIR or data/index

Needs espeak-ng and ffmpeg and a built index (``python -m ragtools build-index``). Exit code 0 when
the answer is in Devanagari with a citation, an OGG/Opus voice note follows it, and ``why``
shows the chain.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from standins.voice_notes import make_voice_note  # noqa: E402
from standins.whatsapp import FakeGraph, audio_message, encode, sign, text_message  # noqa: E402

QUESTION_HI = "छोटे खीरे में कैलोरी की मात्रा"
SARVAM_KEY = "dev-sarvam-key"
APP_SECRET = "dev-app-secret"
VERIFY_TOKEN = "dev-verify-token"
WA_ID = "919800000001"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(name: str, args: list[str], env: dict[str, str], log_dir: Path) -> subprocess.Popen:
    log = (log_dir / f"{name}.log").open("w")
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)


async def wait_ok(http: httpx.AsyncClient, url: str, proc: subprocess.Popen, log: Path,
                  timeout_s: float = 120, ok_status: int = 200) -> None:
    """Poll ``url`` until it answers ``ok_status``; fail early with the log when ``proc``
    exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{log.stem} exited with {proc.returncode}:\n"
                             f"{log.read_text()[-3000:]}")
        try:
            if (await http.get(url)).status_code == ok_status:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit(f"{url} not ready after {timeout_s} s:\n{log.read_text()[-3000:]}")


async def wait_done(db_path: Path, n: int, timeout_s: float = 30) -> None:
    """Until ``n`` messages are handled to the end (their voice stages in the trace too)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with sqlite3.connect(db_path) as conn:
            (done,) = conn.execute(
                "SELECT COUNT(*) FROM inbox WHERE channel = 'whatsapp' AND status = 'done'"
            ).fetchone()
        if done >= n:
            return
        await asyncio.sleep(0.1)
    raise SystemExit(f"{n} message(s) not handled after {timeout_s} s")


async def webhook(http: httpx.AsyncClient, url: str, payload: dict) -> None:
    body = encode(payload)
    response = await http.post(url, content=body, headers={
        "Content-Type": "application/json", "X-Hub-Signature-256": sign(body, APP_SECRET)})
    response.raise_for_status()


async def demo(work: Path) -> bool:
    transcripts = work / "transcripts.json"
    # The stand-in cannot recognise speech: it answers every upload with the note's transcript.
    transcripts.write_text(json.dumps({"default": {
        "transcript": QUESTION_HI, "language_code": "hi-IN"}}, ensure_ascii=False), "utf-8")
    sarvam_port, bot_port = free_port(), free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    sarvam = start("sarvam", ["-m", "standins.sarvam", "--port", str(sarvam_port), "--api-key",
                              SARVAM_KEY, "--transcripts", str(transcripts)], env, work)
    procs = [sarvam]
    try:
        async with FakeGraph() as graph, httpx.AsyncClient(timeout=30) as http:
            graph.add_media("MEDIA-hi-1", make_voice_note(QUESTION_HI, "hi"))
            bot_env = env | {
                "WHATSAPP_TOKEN": graph.token, "WHATSAPP_PHONE_NUMBER_ID": graph.phone_number_id,
                "WHATSAPP_APP_SECRET": APP_SECRET, "WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN,
                "WHATSAPP_API_BASE": graph.url, "WHATSAPP_API_VERSION": graph.version,
                "WHATSAPP_LISTEN": "127.0.0.1", "WHATSAPP_PORT": str(bot_port),
                "SARVAM_API_KEY": SARVAM_KEY, "SARVAM_BASE_URL": f"http://127.0.0.1:{sarvam_port}",
                "BOT_DB_PATH": os.environ.get("BOT_DB_PATH", str(work / "bot.sqlite3")),
            }
            bot = start("bot", ["-m", "bot", "--whatsapp"], bot_env, work)
            procs.append(bot)
            base = f"http://127.0.0.1:{bot_port}"
            started = time.perf_counter()
            await wait_ok(http, f"http://127.0.0.1:{sarvam_port}/", sarvam, work / "sarvam.log",
                          ok_status=404)
            await wait_ok(http, f"{base}/healthz", bot, work / "bot.log")
            print(f"python -m bot --whatsapp listening after "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
            verified = await http.get(f"{base}/webhook", params={
                "hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN,
                "hub.challenge": "1158201444"})
            print(f"webhook verification: {verified.status_code} {verified.text}", flush=True)

            sent = time.perf_counter()
            await webhook(http, f"{base}/webhook", audio_message(WA_ID, "MEDIA-hi-1"))
            [answer] = await graph.wait_for(1, 90)
            answer_text = answer.body["text"]["body"]
            print(f"\n--- reply to the Hindi voice note ({(time.perf_counter() - sent) * 1e3:.0f}"
                  f" ms) ---\n{answer_text}\n", flush=True)
            [voice] = await graph.wait_for(1, 60, kind="audio")
            ogg = graph.media_bytes(voice.body["audio"]["id"])
            is_opus = ogg[:4] == b"OggS" and b"OpusHead" in ogg[:100]
            print(f"--- voice reply ({(voice.at_s - answer.at_s) * 1e3:.0f} ms after the text) "
                  f"---\nmedia {voice.body['audio']['id']}: {len(ogg)} bytes of "
                  f"{'OGG/Opus' if is_opus else 'unknown audio'}\n", flush=True)
            await wait_done(Path(bot_env["BOT_DB_PATH"]), 1)  # send_voice is traced last
            await webhook(http, f"{base}/webhook", text_message(WA_ID, "why"))
            why_text = (await graph.wait_for(2, 30))[1].body["text"]["body"]
            print(f"--- why ---\n{why_text}\n", flush=True)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return (answer_text.startswith(f"_आपने कहा:_ {QUESTION_HI}")
            and re.search(r"```hi-\d+-\d+```", answer_text) is not None
            and "```relevance_guard``` — passed" in why_text and is_opus
            and "```send_voice``` — ok" in why_text)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="voice-rag-whatsapp-"))
    ok = asyncio.run(demo(work))
    print("OK: Devanagari answer with a citation, then an OGG/Opus voice note; why shows the "
          "chain" if ok
          else f"FAILED (logs in {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
