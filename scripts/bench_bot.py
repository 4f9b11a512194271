"""How much the Telegram layer adds over the core pipeline, and whether it stalls the event loop.

The real Application (in this process) polls the fake Bot API server (``python -m
standins.telegram``, its own process) on 127.0.0.1 and answers typed questions from the shared
sample with the configured index; a worker thread plays the users through the fake's control
API, so the event loop measured is the bot's.

- Phase 1, one chat, one question at a time: reply latency (push → sendMessage received) minus
  the pipeline's own ``trace.total_ms``: the bot's overhead (target ≤ 20 ms at P50).
- Phase 2, ``--chats`` chats asking at once, ``--rounds`` rounds: throughput, latency and
  latency beyond the core (which now includes waiting for a free pipeline thread).
- Phase 3, spoken replies (``/voice on``) against the Sarvam stand-in (``python -m
  standins.sarvam --tts-voice tone``, its own process; cache off, so every reply is
  synthesised): the time the voice note adds after the text reply (sendMessage → sendVoice
  received) minus Sarvam's own time (the ``text_to_speech`` stage): encoding to OGG/Opus,
  uploading, chat action; one chat asking ``--voice`` questions in turn, then ``--voice-chats``
  chats at once.
- Throughout: the worst event-loop stall, from a ticker task that sleeps 2 ms and measures how
  late it wakes (target: none over 50 ms), reported for phases 1-2 and for phase 3.

    python scripts/bench_bot.py                         # index: VOICE_RAG_INDEX_DIR
    python scripts/bench_bot.py --chats 50 --rounds 4 --sequential 40 --voice 20
    python scripts/bench_bot.py --slow-callback-ms 30   # name every callback over 30 ms

Prints numbers and writes ``docs/img/bench_bot_voice.png`` (``--plot``).

Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bot.settings import Settings, TelegramSettings  # noqa: E402
from bot.telegram.app import build_application, polling  # noqa: E402
from clients.stt import SarvamSettings  # noqa: E402
from clients.tts import join_wavs  # noqa: E402
from rag.pipeline import Pipeline  # noqa: E402
from rag.settings import SHARED_SAMPLE  # noqa: E402
from standins.sarvam import synthesize_wav  # noqa: E402
from standins.telegram import DEFAULT_TOKEN  # noqa: E402

TICK_S = 0.002


class StallMeter:
    """A task that sleeps ``TICK_S`` in a loop; ``worst_ms`` is the latest wake-up seen."""

    def __init__(self) -> None:
        self.lateness_ms: list[float] = []
        self._task: asyncio.Task | None = None

    async def _tick(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lateness_ms.append((time.perf_counter() - start - TICK_S) * 1000)

    def start(self) -> None:
        self._task = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    @property
    def worst_ms(self) -> float:
        return max(self.lateness_ms, default=0.0)


def questions(n: int) -> list[str]:
    """``n`` query texts from the shared sample, all four languages interleaved."""
    rows = [json.loads(line) for line in
            (SHARED_SAMPLE.parent / "queries.jsonl").read_text("utf-8").splitlines() if line]
    by_lang: dict[str, list[str]] = {}
    for row in rows:
        by_lang.setdefault(row["lang"], []).append(row["text"])
    mixed = [q for group in zip(*by_lang.values(), strict=False) for q in group]
    return (mixed * (n // len(mixed) + 1))[:n]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def report(name: str, latencies_ms: list[float], overheads_ms: list[float]) -> None:
    print(f"{name}: n={len(latencies_ms)} latency P50 {pct(latencies_ms, 50):.1f} ms "
          f"P95 {pct(latencies_ms, 95):.1f} ms | beyond core P50 {pct(overheads_ms, 50):.1f} ms "
          f"P95 {pct(overheads_ms, 95):.1f} ms mean {statistics.fmean(overheads_ms):.1f} ms")


class Driver:
    """Plays the users through the fake server's control API, from a worker thread (plain
    blocking HTTP), so the bot's event loop only runs the bot."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=600)
        self.sent_at: dict[tuple[int, int], float] = {}

    def ask_round(self, chats: list[int], texts: list[str]) -> None:
        """One question per chat, all at once; returns when every reply has arrived."""
        for chat_id, text in zip(chats, texts, strict=True):
            sent_at_s = time.perf_counter()
            response = self.client.post("/_control/push_text",
                                        json={"chat_id": chat_id, "text": text})
            message_id = response.raise_for_status().json()["message"]["message_id"]
            self.sent_at[(chat_id, message_id)] = sent_at_s
        self.client.get("/_control/wait", params={"method": "sendMessage", "n": len(chats),
                                                   "timeout": 600}).raise_for_status()

    def measure(self, db_path: Path, keys: set[tuple[int, int]]) -> tuple[list[float], list[float]]:
        """(latency ms, latency minus trace.total_ms) of the questions in ``keys``.

        Reply times are the fake server's ``perf_counter`` (CLOCK_MONOTONIC, shared by all
        processes on Linux)."""
        with sqlite3.connect(db_path) as conn:
            core_ms = {(c, m): t for c, m, t in
                       conn.execute("SELECT chat_id, message_id, total_ms FROM decisions")}
        calls = self.client.get("/_control/calls", params={"method": "sendMessage"}).json()
        latencies, overheads = [], []
        for call in calls:
            params = call["params"]
            key = (int(params["chat_id"]), int(params["reply_parameters"]["message_id"]))
            if key in keys and key in core_ms:
                latency_ms = (call["at"] - self.sent_at[key]) * 1000
                latencies.append(latency_ms)
                overheads.append(latency_ms - core_ms[key])
        return latencies, overheads


@contextlib.contextmanager
def standin_process(module: str, *args: str) -> Iterator[str]:
    """``python -m <module> --port <free port> [args]``; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", module, "--port", str(port), *args],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{module} did not start in 20 s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def fake_telegram_process() -> contextlib.AbstractContextManager[str]:
    """``python -m standins.telegram`` on a free port; yields its URL."""
    return standin_process("standins.telegram")


def voice_round(driver: Driver, chats: list[int], texts: list[str]) -> None:
    """One question per chat at once; returns when every text and voice reply has arrived."""
    driver.ask_round(chats, texts)
    driver.client.get("/_control/wait", params={"method": "sendVoice", "n": len(chats),
                                                 "timeout": 600}).raise_for_status()


def voice_added_ms(driver: Driver, db_path: Path, keys: set[tuple[int, int]],
                   ) -> dict[str, list[float]]:
    """Per question in ``keys``: ``added`` (sendVoice received minus sendMessage received,
    minus the ``text_to_speech`` stage: what the bot adds beyond Sarvam), and the stages
    ``text_to_speech``, ``encode_voice``, ``send_voice`` (ms) from the stored trace."""
    with sqlite3.connect(db_path) as conn:
        traces = {(c, m): {st["name"]: st["elapsed_ms"] for st in json.loads(t)} for c, m, t in
                  conn.execute("SELECT chat_id, message_id, trace FROM decisions")}
    arrived: dict[str, dict[tuple[int, int], float]] = {}
    for method in ("sendMessage", "sendVoice"):
        for call in driver.client.get("/_control/calls", params={"method": method}).json():
            params = call["params"]
            key = (int(params["chat_id"]), int(params["reply_parameters"]["message_id"]))
            arrived.setdefault(method, {})[key] = call["at"]
    out: dict[str, list[float]] = {"added": [], "text_to_speech": [], "encode_voice": [],
                                   "send_voice": []}
    for key in keys:
        stages = traces.get(key, {})
        if key in arrived.get("sendVoice", {}) and "text_to_speech" in stages:
            gap_ms = (arrived["sendVoice"][key] - arrived["sendMessage"][key]) * 1000
            out["added"].append(gap_ms - stages["text_to_speech"])
            for name in ("text_to_speech", "encode_voice", "send_voice"):
                out[name].append(stages.get(name, 0.0))
    return out


def tts_loop_work_ms(seconds: float = 12.0, n: int = 30) -> float:
    """Median ms of what a spoken reply does on the event loop itself for ``seconds`` of 24 kHz
    audio: parse Sarvam's JSON, decode the base64 WAV, check and join it (the rest, encoding,
    runs in ``Services.voice_pool``)."""
    wav = synthesize_wav("x" * int(seconds * 1000 / 60), "en-IN", 24000, voice="tone")
    body = json.dumps({"request_id": "r", "audios": [base64.b64encode(wav).decode()]})
    times_ms = []
    for _ in range(n):
        start = time.perf_counter()
        audio = base64.b64decode(json.loads(body)["audios"][0], validate=True)
        join_wavs([audio])
        times_ms.append((time.perf_counter() - start) * 1000)
    return statistics.median(times_ms)


def report_voice(name: str, measured: dict[str, list[float]]) -> None:
    added = measured["added"]
    if not added:
        print(f"{name}: no voice replies measured")
        return
    print(f"{name}: n={len(added)} added beyond Sarvam P50 {pct(added, 50):.1f} ms "
          f"P95 {pct(added, 95):.1f} ms | stages P50: sarvam (stand-in) "
          f"{pct(measured['text_to_speech'], 50):.1f} ms, encode_voice "
          f"{pct(measured['encode_voice'], 50):.1f} ms, send_voice "
          f"{pct(measured['send_voice'], 50):.1f} ms")


async def run(args: argparse.Namespace) -> None:
    if args.slow_callback_ms:  # asyncio debug mode logs each callback that runs longer
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = args.slow_callback_ms / 1000
    base = Settings.from_env()
    print(f"loading pipeline: encoder={base.rag.encoder} index={base.rag.index_dir}", flush=True)
    pipeline = await asyncio.to_thread(Pipeline.from_settings, base.rag)
    work = Path(tempfile.mkdtemp(prefix="voice-rag-bench-"))
    with fake_telegram_process() as url:
        settings = replace(
            base,
            telegram=TelegramSettings(token=DEFAULT_TOKEN, api_base=f"{url}/bot",
                                      file_base=f"{url}/file/bot", poll_timeout_s=1,
                                      overall_max_rate=0),
            bot=replace(base.bot, db_path=work / "bench.sqlite3", rate_limit_n=0),
        )
        driver = Driver(url)
        meter = StallMeter()
        # read the questions before any meter runs: parsing the queries file on the event loop
        # is the benchmark's own work (a long step on a loaded machine: docs/benchmarks.md,
        # "Figures behind the code's constants"), not the bot's
        sequential_texts = questions(args.sequential)
        texts = questions(args.chats * args.rounds)
        voice_texts = questions(args.voice + max(1, args.voice_chats))
        async with polling(build_application(settings, pipeline), settings):
            meter.start()
            for text in sequential_texts:
                await asyncio.to_thread(driver.ask_round, [1], [text])
            sequential = set(driver.sent_at)
            seq_stall_ms = meter.worst_ms

            chats = list(range(1000, 1000 + args.chats))
            start = time.perf_counter()
            for r in range(args.rounds):
                await asyncio.to_thread(driver.ask_round, chats,
                                        texts[r * args.chats:(r + 1) * args.chats])
            elapsed_s = time.perf_counter() - start
            await meter.stop()
        seq = driver.measure(settings.bot.db_path, sequential)
        con = driver.measure(settings.bot.db_path, set(driver.sent_at) - sequential)

        with standin_process("standins.sarvam", "--api-key", "bench-key",
                             "--tts-voice", "tone") as sarvam_url:
            voice_settings = replace(
                settings, sarvam=SarvamSettings(api_key="bench-key", base_url=sarvam_url),
                tts=replace(settings.tts, cache_mb=0))
            voice_meter = StallMeter()
            async with polling(build_application(voice_settings, pipeline), voice_settings):
                voice_chats = list(range(5000, 5000 + max(1, args.voice_chats)))
                await asyncio.to_thread(driver.ask_round, voice_chats,
                                        ["/voice on"] * len(voice_chats))
                before = set(driver.sent_at)
                voice_meter.start()
                for text in voice_texts[:args.voice]:
                    await asyncio.to_thread(voice_round, driver, voice_chats[:1], [text])
                voice_seq = set(driver.sent_at) - before
                voice_seq_stall_ms = voice_meter.worst_ms
                # questions not asked yet: a repeat within BOT_REPEAT_WINDOW_S gets a pointer
                await asyncio.to_thread(voice_round, driver, voice_chats,
                                        voice_texts[args.voice:])
                voice_con = set(driver.sent_at) - before - voice_seq
                await voice_meter.stop()
            voice_seq_ms = voice_added_ms(driver, settings.bot.db_path, voice_seq)
            voice_con_ms = voice_added_ms(driver, settings.bot.db_path, voice_con)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (stalls include "
          f"time the OS gave other processes); fake Telegram in its own process; no client-side "
          f"send cap; {settings.bot.pipeline_threads} pipeline thread(s)")
    report("phase 1, one chat sequential", *seq)
    report(f"phase 2, {args.chats} chats x {args.rounds} rounds", *con)
    print(f"phase 2 throughput: {len(con[0]) / elapsed_s:.1f} answers/s "
          f"({len(con[0])} in {elapsed_s:.1f} s)")
    print(f"event loop: worst stall {meter.worst_ms:.1f} ms overall "
          f"({seq_stall_ms:.1f} ms in phase 1), P99 lateness "
          f"{pct(meter.lateness_ms, 99):.1f} ms, {sum(x > 50 for x in meter.lateness_ms)} of "
          f"{len(meter.lateness_ms)} ticks of {TICK_S * 1000:.0f} ms late by > 50 ms")
    report_voice("phase 3, spoken replies, one chat sequential", voice_seq_ms)
    print(f"phase 3 work on the event loop per 12 s reply (JSON, base64, WAV join): median "
          f"{tts_loop_work_ms():.1f} ms")
    report_voice(f"phase 3, spoken replies, {len(voice_chats)} chats at once", voice_con_ms)
    print(f"phase 3 event loop: worst stall {voice_meter.worst_ms:.1f} ms "
          f"({voice_seq_stall_ms:.1f} ms one chat), P99 lateness "
          f"{pct(voice_meter.lateness_ms, 99):.1f} ms, "
          f"{sum(x > 50 for x in voice_meter.lateness_ms)} of {len(voice_meter.lateness_ms)} "
          "ticks late by > 50 ms")
    print(f"targets: beyond-core P50 <= 20 ms (phase 1): {pct(seq[1], 50):.1f} ms; "
          f"no stall > 50 ms: {meter.worst_ms:.1f} ms")
    if args.plot:
        plot_voice({"one chat": voice_seq_ms, f"{len(voice_chats)} chats at once": voice_con_ms},
                   os.getloadavg()[0], Path(args.plot))


def plot_voice(runs: dict[str, dict[str, list[float]]], load: float, path: Path) -> None:
    """Two panels: the distribution of the time a voice note adds beyond Sarvam (one curve per
    run), and where it goes at P50 (stand-in, encoding, upload, the rest)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    for name, measured in runs.items():
        added = sorted(measured["added"])
        if added:
            a.step(added, [(i + 1) / len(added) for i in range(len(added))], where="post",
                   label=f"{name} (n={len(added)})")
    a.set_xlabel("voice note after the text, beyond Sarvam (ms)")
    a.set_ylabel("share of replies")
    a.legend(fontsize=8)
    names = [n for n, m in runs.items() if m["added"]]
    bottom = [0.0] * len(names)
    parts = [("text_to_speech", "Sarvam (stand-in)", "#8c8c8c"),
             ("encode_voice", "encode OGG/Opus", "#4c72b0"),
             ("send_voice", "sendVoice", "#55a868")]
    for key, label, color in parts:
        heights = [pct(runs[n][key], 50) for n in names]
        b.bar(names, heights, bottom=bottom, label=label, color=color)
        bottom = [x + h for x, h in zip(bottom, heights, strict=True)]
    b.set_ylabel("P50 per stage (ms)")
    b.legend(fontsize=8)
    fig.suptitle(f"Spoken replies on 2 shared cores, load {load:.1f} (scripts/bench_bot.py)",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=50, help="concurrent chats in phase 2")
    parser.add_argument("--rounds", type=int, default=4, help="questions per chat in phase 2")
    parser.add_argument("--sequential", type=int, default=40, help="questions in phase 1")
    parser.add_argument("--voice", type=int, default=20,
                        help="spoken replies in phase 3, one chat")
    parser.add_argument("--voice-chats", type=int, default=10,
                        help="chats asking at once with spoken replies in phase 3")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "img" / "bench_bot_voice.png"),
                        help="PNG of the spoken-reply phase ('' = none)")
    parser.add_argument("--slow-callback-ms", type=float, default=0,
                        help="log every event-loop callback longer than this (asyncio debug "
                             "mode: slower; names what stalls the loop); 0 = off")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
