"""How long the dashboard takes to render its pages over a decision log of realistic size.

Fills a temporary database with ``--n`` decisions through the storage API (``Database.
record_decision``, ``add_stages`` for spoken replies, ``Inbox`` for WhatsApp messages):
four languages, Telegram, WhatsApp, console and command-line chats, typed and voice questions,
answers with citations, refusals below the floor, unanswerable and ungrounded ones, bad input,
speech-to-text outages and failed spoken replies, with traces of the pipeline's stages; then
spreads their times over ``--days`` days (one UPDATE, since ``record_decision`` stamps "now").
It then serves the dashboard (``bot.dashboard.create_app``) on 127.0.0.1 and times ``--repeat``
GETs of each page over HTTP from a client in the same process, after one warm-up request each.
The database is a temporary SQLite file, or with ``--postgres`` a database in a throwaway
PostgreSQL cluster (``standins.postgres``: Debian's server binaries, started in a temporary
folder on a free port, ``fsync`` off), or ``--database-url`` (an empty PostgreSQL database).

    python scripts/bench_dashboard.py                    # 1,000 decisions, 15 requests a page
    python scripts/bench_dashboard.py --n 10000 --repeat 9
    python scripts/bench_dashboard.py --postgres         # the same on a throwaway PostgreSQL
    python scripts/bench_dashboard.py --bot              # and the bot's answers/s beside it

Prints the median and P90 in milliseconds per page; asserts nothing.

``--bot`` then measures what an open dashboard costs the bot: the real Application answers
``--chats`` chats at once for ``--rounds`` rounds against the fake Bot API server (as in
``scripts/bench_bot.py``, whose helpers it uses), from the configured index
(``VOICE_RAG_INDEX_DIR``) or, where there is none, a temporary index of the first
``--passages`` passages of the shared sample built with the configured encoder. Throughput is
measured alternately without and with ``python -m bot dashboard`` (its own process, reading the
bot's database) polled by a client thread that loads the questions list, the latency page and
``/metrics`` in a loop with ``--poll-s`` between loops (a far busier operator than a person, or
Prometheus scraping every second).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from bot.dashboard import DashboardSettings, create_app  # noqa: E402
from rag.types import Citation, Reason, ReasonCode, Result, Stage, Status, Trace  # noqa: E402
from storage.db import Database  # noqa: E402
from storage.inbox import Inbox  # noqa: E402

FLOORS = {"en": 0.840, "hi": 0.850, "gu": 0.840, "te": 0.840}
QUESTIONS = {
    "en": ["How much does an Xbox 360 cost?", "Who is the Prime Minister of India?",
           "How many calories are in a small cucumber?", "Does medical marijuana help?",
           "How does pollution affect population growth?", "what is the capital of australia"],
    "hi": ["छोटे खीरे में कैलोरी की मात्रा", "भारत के प्रधानमंत्री कौन हैं?",
           "एक्सबॉक्स 360 की कीमत कितनी है?"],
    "gu": ["શું તબીબી મારિજુઆના મદદ કરે છે?", "ભારતની રાજધાની કઈ છે?"],
    "te": ["కాలుష్యం మానవ జనాభాను ఎలా పెంచుతుంది", "భారతదేశ ప్రధాన మంత్రి ఎవరు?"],
}
EXCERPT = ("The Xbox 360 launched at $299 for the Core system and $399 for the premium "
           "bundle; later price cuts brought the Arcade model to $199. ")


def _trace(rng: random.Random, lang: str, top: float, is_voice: bool) -> Trace:
    trace = Trace()
    if is_voice:
        trace.add("voice_checks", "passed", "36095 bytes, 3 s advertised")
        trace.add("download", "ok", "36095 bytes", rng.uniform(20, 80))
        trace.add("transcode", "ok", "16 kHz mono WAV, 3.0 s", rng.uniform(15, 40))
        trace.add("speech_gate", "passed", "speech 2.10 s of 3.00 s", rng.uniform(1, 4))
        trace.add("split", "1 chunk(s)", "", rng.uniform(0.1, 0.5))
        trace.add("speech_to_text", f"{lang}-IN", "40 chars, 1 attempt(s)",
                  rng.lognormvariate(6.3, 0.4))
    trace.add("input_guard", "passed", "ok: 40 chars", rng.uniform(0.05, 0.3))
    trace.add("language", lang, "script", rng.uniform(0.02, 0.2))
    trace.add("embed", "ok", "onnx-int8:multilingual-e5-small, dim 384",
              rng.lognormvariate(2.2, 0.3))
    hits = ", ".join(f"{lang}-{rng.randint(10_000, 1_200_000)}-{i} {top - 0.01 * i:.3f}"
                     for i in range(3))
    trace.add("search", "15 hits", hits, rng.lognormvariate(0.3, 0.4))
    return trace


def _result(rng: random.Random, lang: str, is_voice: bool) -> Result:
    floor = FLOORS[lang]
    query = rng.choice(QUESTIONS[lang])
    roll = rng.random()
    if roll < 0.03:
        trace = Trace()
        trace.add("input_guard", "refused", "too_short: 1 letter", 0.1)
        return Result(Status.REFUSED_BAD_INPUT, "?", lang, message="too short",
                      trace=trace, reason=Reason(ReasonCode.TOO_SHORT, "1 letter", n_letters=1))
    top = rng.gauss(floor + 0.02, 0.035)
    trace = _trace(rng, lang, top, is_voice)
    if top < floor:
        detail = f"top {top:.3f} < floor {floor:.3f} ({lang})"
        trace.add("relevance_guard", "refused", detail, 0.02)
        return Result(Status.REFUSED_NO_MATCH, query, lang, top_score=top, floor=floor,
                      message=detail, trace=trace, reason=Reason(
                          ReasonCode.BELOW_FLOOR, detail, score=top, floor=floor, lang=lang))
    trace.add("relevance_guard", "passed", f"top {top:.3f} >= floor {floor:.3f} ({lang})", 0.02)
    trace.add("select_answer", "chosen", "sentence 2 of en-331047-3", rng.uniform(0.5, 3))
    probability = rng.random()
    trace.add("answerability_gate", "passed" if probability > 0.2 else "refused",
              f"p {probability:.2f} vs 0.20 (screen)", rng.uniform(0.1, 2))
    if probability <= 0.2:
        detail = f"gate p {probability:.2f} < 0.20"
        return Result(Status.REFUSED_UNANSWERABLE, query, lang, top_score=top, floor=floor,
                      message=detail, trace=trace, reason=Reason(
                          ReasonCode.NOT_ANSWERABLE, detail, score=top, floor=floor, lang=lang,
                          probability=probability, threshold=0.2))
    trace.add("answer", "extractive", "120 chars from en-331047-3", rng.uniform(0.1, 1))
    is_grounded = rng.random() > 0.04
    trace.add("grounding_guard", "passed" if is_grounded else "refused", "overlap 0.82",
              rng.uniform(0.2, 2))
    if not is_grounded:
        return Result(Status.REFUSED_UNGROUNDED, query, lang, top_score=top, floor=floor,
                      message="answer not grounded", trace=trace,
                      reason=Reason(ReasonCode.UNGROUNDED, "overlap 0.31 < 0.5"))
    citations = [Citation(f"{lang}-331047-{i}", lang, top - 0.01 * i, EXCERPT * 2)
                 for i in range(rng.randint(1, 3))]
    return Result(Status.ANSWERED, query, lang, answer=EXCERPT.strip(), answer_lang=lang,
                  citations=citations, top_score=top, floor=floor,
                  is_low_confidence=top < floor + 0.03, trace=trace)


def _stt_outage(rng: random.Random, lang: str) -> Result:
    trace = Trace()
    trace.add("voice_checks", "passed", "36095 bytes, 3 s advertised")
    trace.add("download", "ok", "36095 bytes", rng.uniform(20, 80))
    trace.add("speech_to_text", "error", "ServiceError: sarvam_stt server_error: 503",
              rng.uniform(2000, 10000))
    trace.add("voice", "stt_down", "sarvam_stt server_error: 503")
    return Result(Status.ERROR, "", lang, message="stt_down: sarvam down", trace=trace,
                  reason=Reason(ReasonCode.SPEECH_REFUSED, "sarvam down", key="stt_down"))


async def fill(target: Path | str, n: int, days: int, seed: int = 0,
               end: datetime | None = None) -> None:
    """Record ``n`` decisions into ``target`` (an SQLite file or a PostgreSQL URL, as
    ``Database.open`` takes it; an empty database), then spread them evenly over ``days`` days
    ending at ``end`` (default now; newest last). The same ``seed`` and ``end`` record the same
    log on either backend."""
    rng = random.Random(seed)
    async with await Database.open(target) as db:
        inbox = Inbox(db)
        for i in range(n):
            lang = rng.choices(list(FLOORS), weights=[45, 30, 13, 12])[0]
            channel = rng.choices(["telegram", "whatsapp", "console", "cli"],
                                  weights=[60, 30, 7, 3])[0]
            is_voice = channel != "cli" and rng.random() < 0.3
            source = "cli" if channel == "cli" else "voice" if is_voice else "text"
            chat_id = {"telegram": 1000 + rng.randint(0, 80), "console": 0, "cli": -1,
                       "whatsapp": 919800000000 + rng.randint(0, 40)}[channel]
            message_id = None if channel in ("console", "cli", "whatsapp") else 10_000 + i
            result = (_stt_outage(rng, lang) if is_voice and rng.random() < 0.04
                      else _result(rng, lang, is_voice))
            stt = result.trace.get("speech_to_text")
            decision_id = await db.record_decision(
                "console" if channel == "cli" else channel, chat_id, message_id, chat_id, source,
                result,
                transcript=result.query if is_voice else None,
                stt_ms=stt.elapsed_ms if stt is not None else None)
            await db.set_reply_ms(decision_id, rng.lognormvariate(3.5, 0.5))
            if is_voice and result.is_answered:
                failed = rng.random() < 0.05
                await db.add_stages(decision_id, [Stage(
                    "text_to_speech", "failed" if failed else "ok",
                    "timeout: ReadTimeout after 10 s" if failed else "hi-IN shubh bulbul:v3",
                    10000.0 if failed else rng.lognormvariate(6.5, 0.3))])
            if channel == "whatsapp":
                wamid = f"wamid.bench{i}"
                await inbox.claim("whatsapp", wamid, chat_id, "{}")
                await inbox.finish("whatsapp", wamid, f"replied decision_id={decision_id}",
                                   decision_id)
        start = (end or datetime.now(UTC)) - timedelta(days=days)
        step = timedelta(days=days) / max(1, n)
        async with db.backend.transaction() as tx:
            await tx.executemany("UPDATE decisions SET created_at = ? WHERE id = ?", [
                ((start + k * step).isoformat(timespec="milliseconds"), k + 1)
                for k in range(n)])
            await tx.execute("UPDATE refusals SET created_at = (SELECT created_at FROM "
                             "decisions WHERE decisions.id = refusals.decision_id)")


async def bench(target: Path | str, repeat: int) -> list[tuple[str, list[float]]]:
    """Median-ready timings (ms) of ``repeat`` GETs per page, each after one warm-up GET, of
    the dashboard over ``target`` (an SQLite file or a PostgreSQL URL)."""
    async with await Database.open(target) as db:
        chain_id = (await db.backend.fetchone(
            "SELECT id FROM decisions WHERE source = 'voice' AND status = 'answered' "
            "ORDER BY id DESC LIMIT 1"))[0]
        n = await db.count_decisions()
    database = {"db_path": target} if isinstance(target, Path) else {"database_url": target}
    app = create_app(DashboardSettings(**database, index_dir=ROOT / "no-index"))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    pages = [("list, 50 rows (default page)", "/"),
             (f"list, {min(n, 1000)} rows (?per={min(n, 1000)})", f"/?per={min(n, 1000)}"),
             ("list filtered (refused-no-match, hi)", "/?status=refused-no-match&lang=hi"),
             ("decision chain", f"/decision/{chain_id}"),
             ("refusals per day", "/refusals"), ("scores (4 SVG charts)", "/scores"),
             ("latency & speech", "/latency"), ("refused CSV", "/export/refused.csv"),
             ("/metrics", "/metrics")]
    out = []
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            for label, path in pages:
                timings = []
                for k in range(repeat + 1):
                    started = time.perf_counter()
                    async with http.get(path) as response:
                        await response.read()
                        assert response.status == 200, (path, response.status)
                    if k:  # the first is a warm-up (template compilation)
                        timings.append((time.perf_counter() - started) * 1000)
                out.append((label, timings))
    finally:
        await runner.cleanup()
    return out


def _bot_pipeline(n_passages: int, work: Path):
    """The configured index's pipeline, else one over a temporary index of the first
    ``n_passages`` passages of the shared sample."""
    from rag.corpus import read_passages
    from rag.encoders import load_encoder
    from rag.pipeline import Pipeline
    from rag.settings import SHARED_SAMPLE, RagSettings
    from ragtools.build import ensure_encoder_files
    from ragtools.index_build import build_index

    settings = RagSettings.from_env()
    if not (settings.index_dir / "meta.json").is_file():
        ensure_encoder_files(settings.encoder)
        index_dir = work / "index"
        passages = read_passages(SHARED_SAMPLE)[:n_passages]
        print(f"no index at {settings.index_dir}: building one of {len(passages)} passages of "
              f"the shared sample with {settings.encoder} into {index_dir}", flush=True)
        build_index(passages, load_encoder(settings.encoder), index_dir, show_progress=False)
        settings = RagSettings.from_env({**os.environ, "VOICE_RAG_INDEX_DIR": str(index_dir)})
    return Pipeline.from_settings(settings)


class _Poller:
    """A thread loading dashboard pages in a loop while ``on`` is set; counts the loads."""

    def __init__(self, url: str, pause_s: float) -> None:
        import threading

        import httpx

        self.client = httpx.Client(base_url=url, timeout=60)
        self.pause_s, self.n_loads = pause_s, 0
        self.on, self.stopped = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            if not self.on.wait(0.1):
                continue
            for path in ("/", "/latency", "/metrics"):
                self.client.get(path).raise_for_status()
                self.n_loads += 1
            time.sleep(self.pause_s)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        self.client.close()


async def bench_bot(args: argparse.Namespace) -> None:
    """Answers/s of the bot without and with an open, busy dashboard, alternating."""
    with tempfile.TemporaryDirectory(prefix="voice-rag-bench-dashboard-") as tmp:
        await _bench_bot_in(args, Path(tmp))


async def _bench_bot_in(args: argparse.Namespace, work: Path) -> None:
    import subprocess
    from dataclasses import replace

    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_bot as bb

    from bot.settings import Settings, TelegramSettings
    from bot.telegram.app import build_application, polling
    from standins.telegram import DEFAULT_TOKEN

    pipeline = await asyncio.to_thread(_bot_pipeline, args.passages, work)
    base = Settings.from_env({**os.environ, "VOICE_RAG_INDEX_DIR": str(
        pipeline.settings.index_dir)})
    db_path = work / "bot.sqlite3"
    texts = bb.questions(args.chats * args.rounds * 2 * args.pairs)
    results: dict[str, list[float]] = {"without": [], "with": []}
    with bb.fake_telegram_process() as url:
        settings = replace(
            base, telegram=TelegramSettings(token=DEFAULT_TOKEN, api_base=f"{url}/bot",
                                            file_base=f"{url}/file/bot", poll_timeout_s=1,
                                            overall_max_rate=0),
            bot=replace(base.bot, db_path=db_path, rate_limit_n=0, repeat_window_s=0))
        driver = bb.Driver(url)
        async with polling(build_application(settings, pipeline), settings):
            await asyncio.to_thread(driver.ask_round, [1], ["warm-up question"])
            dashboard = subprocess.Popen(
                [sys.executable, "-m", "bot", "dashboard", "--port", "0", "--db", str(db_path)],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            poller = _Poller(dashboard.stdout.readline().split()[1].rstrip("/"), args.poll_s)
            try:
                k = 0
                for _ in range(args.pairs):
                    for condition in ("without", "with"):
                        if condition == "with":
                            poller.on.set()
                        chats = list(range(1000 + k * args.chats, 1000 + (k + 1) * args.chats))
                        n_answered, started = 0, time.perf_counter()
                        for _ in range(args.rounds):
                            await asyncio.to_thread(driver.ask_round, chats,
                                                    texts[k * args.chats:(k + 1) * args.chats])
                            n_answered += len(chats)
                            k += 1
                        results[condition].append(n_answered / (time.perf_counter() - started))
                        poller.on.clear()
            finally:
                poller.close()
                dashboard.terminate()
                dashboard.wait(10)
    print(f"bot: {args.chats} chats x {args.rounds} rounds per measurement, {args.pairs} pairs "
          f"alternating; index {pipeline.settings.index_dir} ({len(pipeline.index)} "
          f"passages), load average {os.getloadavg()[0]:.2f}")
    for condition, rates in results.items():
        print(f"  {condition} the dashboard: " + ", ".join(f"{r:.1f}" for r in rates)
              + f" answers/s (median {statistics.median(rates):.1f})")
    print(f"  dashboard pages loaded meanwhile: {poller.n_loads}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="decisions to record")
    parser.add_argument("--days", type=int, default=14, help="days to spread them over")
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per page")
    parser.add_argument("--bot", action="store_true",
                        help="also measure the bot's answers/s without and with the dashboard")
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=3, help="without/with measurements")
    parser.add_argument("--poll-s", type=float, default=0.5,
                        help="pause between the poller's loops over three pages")
    parser.add_argument("--passages", type=int, default=1000,
                        help="passages of the temporary index when none is configured")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--postgres", action="store_true",
                       help="record into a throwaway PostgreSQL cluster instead of SQLite")
    where.add_argument("--database-url", help="record into this empty PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        target: Path | str = args.database_url or Path(tmp) / "bench.sqlite3"
        if args.postgres:
            from standins.postgres import ThrowawayCluster

            cluster = ThrowawayCluster.start()
            stack.callback(cluster.stop)
            target = cluster.create_database("bench")
        started = time.perf_counter()
        asyncio.run(fill(target, args.n, args.days))
        size = (f"{target.stat().st_size / 2**20:.1f} MB" if isinstance(target, Path)
                else "PostgreSQL")
        print(f"filled {args.n} decisions in {time.perf_counter() - started:.1f} s ({size}); "
              f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
        results = asyncio.run(bench(target, args.repeat))
    print(f"{'page':<40} {'median ms':>10} {'P90 ms':>8}  ({args.repeat} requests each)")
    for label, timings in results:
        p90 = sorted(timings)[max(0, int(0.9 * len(timings)) - 1)]
        print(f"{label:<40} {statistics.median(timings):>10.1f} {p90:>8.1f}")
    if args.bot:
        asyncio.run(bench_bot(args))


if __name__ == "__main__":
    main()
