"""Answers/s, reply latency and memory of 1, 2 and 3 replicas on PostgreSQL against one on SQLite,
all behind nginx, in one run (issue 24).

Each configuration is a :class:`standins.replicas.ReplicaSet` (Telegram webhook mode, nginx
``least_conn`` in front) with its own fake Bot API server (``standins.telegram``, in this
process) whose webhook is nginx's URL; all configurations are started first and stay up, and
each round sends a burst to each in turn (the order alternating between rounds), so they see the
same machine load. A burst is ``--n`` typed training questions (en, hi, gu, te interleaved, new
ones each round) from ``--chats`` chats, pushed at once; the fake delivers them to the webhook one
at a time, as each POST is answered 200. Reply latency is the push to the fake receiving the
``sendMessage`` quoting the question; answers/s is the burst's questions over the time from the
first push to the last reply.

PostgreSQL is a throwaway cluster (``standins.postgres``: fsync and synchronous_commit off, so
its commits are cheaper than a durable server's), a database per configuration, unless
``--database-url`` names a server (a database per configuration is created there: the URL's
user needs CREATEDB). Also printed: memory per replica after the bursts (RSS and PSS from
``/proc/<pid>/smaps_rollup``; PSS shares the memory-mapped index and libraries among the
replicas), the pipeline's and the query embedding's milliseconds per question (decision log),
and transactions per question (``pg_stat_database.xact_commit``: every transaction that ended
in a commit, reads included). ``--ref REF`` adds the PostgreSQL configurations again running
REF's bot (``git archive``), e.g. a branch that wires the replicas to the shared stores.

    python scripts/bench_replicas.py        # index: VOICE_RAG_INDEX_DIR or data/index
    python scripts/bench_replicas.py --rounds 5 --plot docs/img/bench_replicas.png

Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_answer_stage import checkout  # noqa: E402
from bench_burst import mixed_questions, pct  # noqa: E402

from standins.postgres import ThrowawayCluster  # noqa: E402
from standins.replicas import Memory, ReplicaSet  # noqa: E402
from standins.telegram import FakeTelegram  # noqa: E402

WARM_UP = "How much does an Xbox 360 cost?"
FIRST_CHAT = 10_000
STATS_FLUSH_S = 11.0  # an idle PostgreSQL 15 backend reports its counters within 10 s


@dataclass
class Config:
    """One configuration under test and what was measured of it."""

    name: str
    n_replicas: int
    database_url: str
    code: Path = ROOT  # the checkout the replicas run
    latencies_ms: list[list[float]] = field(default_factory=list)  # per round
    rates: list[float] = field(default_factory=list)  # answers/s per round
    memory: list[Memory] = field(default_factory=list)  # per replica, after the bursts
    commits_per_question: float | None = None
    pipeline_ms: list[float] = field(default_factory=list)
    embed_ms: list[float] = field(default_factory=list)
    per_replica: list[int] = field(default_factory=list)  # webhook POSTs each replica took

    @property
    def is_postgres(self) -> bool:
        return self.database_url.startswith("postgresql")

    def summary(self) -> tuple[float, float, float]:
        """Medians over rounds of (P50 ms, P95 ms, answers/s)."""
        return (statistics.median(pct(r, 50) for r in self.latencies_ms),
                statistics.median(pct(r, 95) for r in self.latencies_ms),
                statistics.median(self.rates))


async def burst(tg: FakeTelegram, config: Config, chats: list[int], texts: list[str]) -> None:
    """``texts`` from ``chats`` in turn, pushed at once; waits for a reply to each."""
    n_before = len(tg._of("sendMessage"))
    start = time.perf_counter()
    pushed = {}
    for i, text in enumerate(texts):
        chat_id = chats[i % len(chats)]
        update = await tg.push_text(chat_id, text)
        pushed[(chat_id, update["message"]["message_id"])] = time.perf_counter()
    await tg.wait_for("sendMessage", n=len(texts), timeout=600)
    replies = tg._of("sendMessage")[n_before:]
    latencies = [(c.at - pushed[key]) * 1000 for c in replies
                 if (key := (int(c.params["chat_id"]),
                             int(c.params["reply_parameters"]["message_id"]))) in pushed]
    config.latencies_ms.append(latencies)
    config.rates.append(len(latencies) / (max(c.at for c in replies) - start))


def create_database(server_url: str, number: int) -> str:
    """A new database on ``server_url``'s server; its URL."""
    import psycopg

    name = f"bench_replicas_{os.getpid()}_{number}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def xact_commits(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT xact_commit FROM pg_stat_database "
                            "WHERE datname = current_database()").fetchone()[0]


def decision_rows(url: str) -> list[tuple[float, str]]:
    """(total_ms, trace JSON) of the bursts' decisions."""
    sql = f"SELECT total_ms, trace FROM decisions WHERE chat_id >= {FIRST_CHAT}"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def read_decisions(config: Config) -> None:
    for total_ms, trace in decision_rows(config.database_url):
        config.pipeline_ms.append(total_ms)
        stages = json.loads(trace) if isinstance(trace, str) else trace
        config.embed_ms += [s["elapsed_ms"] for s in stages if s["name"] == "embed"]


def upstream_counts(replicas: ReplicaSet) -> list[int]:
    """Webhook POSTs nginx passed to each replica (its access log), in replica order."""
    log = (replicas.nginx_dir / "logs" / "access.log").read_text()
    return [log.count(f"upstream=127.0.0.1:{r.port} ") for r in replicas.replicas]


async def run(args: argparse.Namespace) -> None:
    index_dir = Path(os.environ.get("VOICE_RAG_INDEX_DIR") or ROOT / "data" / "index")
    tmp = Path(tempfile.mkdtemp(prefix="voice-rag-bench-replicas-"))
    counts = [int(n) for n in args.replicas.split(",")]
    n_distinct = len(mixed_questions(10**9, 0))
    if args.rounds * args.n > n_distinct:
        print(f"warning: {args.rounds} rounds of {args.n} need {args.rounds * args.n} questions, "
              f"there are {n_distinct}: later rounds repeat earlier ones, whose vectors the "
              f"replicas' embedding cache keeps (faster than new questions)", flush=True)
    load_before = os.getloadavg()
    async with contextlib.AsyncExitStack() as stack:
        server_url = args.database_url
        if not server_url:
            cluster = ThrowawayCluster.start()
            stack.callback(cluster.stop)
            server_url = cluster.url
        configs = [Config("1 on SQLite", 1, f"sqlite:///{tmp / 'bot.sqlite3'}")]
        sides = [("", ROOT)]
        if args.ref:
            sides.append((f" ({args.ref})", checkout(args.ref, tmp)))
        for label, code in sides:
            for n in counts:
                configs.append(Config(f"{n} on PostgreSQL{label}", n,
                                      create_database(server_url, len(configs)), code))
        env = {"VOICE_RAG_INDEX_DIR": str(index_dir), "SARVAM_API_KEY": "unused",
               **dict(kv.split("=", 1) for kv in args.env)}
        started = []
        for config in configs:
            tg = await stack.enter_async_context(FakeTelegram())
            t0 = time.perf_counter()
            replicas = await stack.enter_async_context(ReplicaSet(
                n_telegram=config.n_replicas, database_url=config.database_url, code=config.code,
                work_dir=tmp / f"config-{configs.index(config)}", balance=args.balance,
                env=env | {"TELEGRAM_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url,
                           "TELEGRAM_FILE_BASE": tg.base_file_url}))
            print(f"{config.name}: {config.n_replicas} replica(s) listening in "
                  f"{time.perf_counter() - t0:.1f} s (load {os.getloadavg()[0]:.2f})", flush=True)
            for i in range(2 * config.n_replicas):  # warm-up: each replica answers one or two
                await tg.push_text(1 + i, WARM_UP)
            await tg.wait_for("sendMessage", 2 * config.n_replicas, timeout=120)
            started.append((config, tg, replicas))
        warm_posts = {id(c): upstream_counts(r) for c, _tg, r in started}
        await asyncio.sleep(STATS_FLUSH_S)
        commits_before = {id(c): xact_commits(c.database_url) for c in configs if c.is_postgres}
        for r in range(args.rounds):
            texts = mixed_questions(args.n, r * args.n)
            chats = list(range(FIRST_CHAT + r * args.chats, FIRST_CHAT + (r + 1) * args.chats))
            for config, tg, _replicas in started if r % 2 == 0 else started[::-1]:
                await asyncio.sleep(args.pause_s)  # let the previous burst's bookkeeping settle
                await burst(tg, config, chats, texts)
                p = config.latencies_ms[-1]
                print(f"round {r + 1} {config.name}: P50 {pct(p, 50):.0f} ms, P95 "
                      f"{pct(p, 95):.0f} ms, {config.rates[-1]:.1f} answers/s "
                      f"(load {os.getloadavg()[0]:.2f})", flush=True)
        n_questions = args.rounds * args.n
        await asyncio.sleep(STATS_FLUSH_S)
        for config, _tg, replicas in started:
            config.memory = [r.memory() for r in replicas.replicas]
            config.per_replica = [b - a for a, b in zip(warm_posts[id(config)],
                                                        upstream_counts(replicas), strict=True)]
            if config.is_postgres:
                config.commits_per_question = (
                    xact_commits(config.database_url) - commits_before[id(config)]) / n_questions
            read_decisions(config)
    load_after = os.getloadavg()
    shutil.rmtree(tmp, ignore_errors=True)
    report(configs, args, load_before, load_after)
    if args.plot:
        plot(configs, args, load_after, Path(args.plot))


def report(configs: list[Config], args: argparse.Namespace, load_before: tuple,
           load_after: tuple) -> None:
    print(f"\n{args.rounds} rounds of {args.n} mixed typed questions from {args.chats} chats at "
          f"once, Telegram webhook through nginx ({args.balance}); {os.cpu_count()} cores, load "
          f"average {load_before[0]:.2f} before, {load_after[0]:.2f} after (1/5/15 min: "
          f"{' '.join(f'{x:.2f}' for x in load_after)}); medians over rounds")
    width = max(len(c.name) for c in configs)
    print(f"{'configuration':<{width}} {'answers/s':>9} {'P50 ms':>7} {'P95 ms':>7} "
          f"{'RSS MiB/replica':>15} {'PSS MiB/replica':>15} {'PSS MiB all':>11} "
          f"{'xacts/q':>9} {'pipeline ms':>11} {'embed ms':>8}  webhook POSTs per replica")
    base_rate = configs[0].summary()[2]
    for c in configs:
        p50, p95, rate = c.summary()
        rss = statistics.median(m.rss_kib for m in c.memory) / 1024
        pss = statistics.median(m.pss_kib for m in c.memory) / 1024
        pss_all = sum(m.pss_kib for m in c.memory) / 1024
        commits = f"{c.commits_per_question:.1f}" if c.commits_per_question is not None else "-"
        print(f"{c.name:<{width}} {rate:>9.1f} {p50:>7.0f} {p95:>7.0f} {rss:>15.0f} {pss:>15.0f} "
              f"{pss_all:>11.0f} {commits:>9} {pct(c.pipeline_ms, 50):>11.1f} "
              f"{pct(c.embed_ms, 50):>8.1f}  {c.per_replica} ({rate / base_rate:.2f}x SQLite)")


def plot(configs: list[Config], args: argparse.Namespace, load: tuple, path: Path) -> None:
    """Answers/s and P50/P95 reply latency per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [c.name for c in configs]
    summaries = [c.summary() for c in configs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(4 + 1.2 * len(configs), 4.2))
    left.bar(names, [s[2] for s in summaries], color="#4c72b0")
    left.set_ylabel("answers/s (median over rounds)")
    x = range(len(configs))
    right.bar([i - 0.2 for i in x], [s[0] for s in summaries], width=0.4, label="P50")
    right.bar([i + 0.2 for i in x], [s[1] for s in summaries], width=0.4, label="P95")
    right.set_xticks(list(x), names)
    right.set_ylabel("reply latency (ms)")
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=7, labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    fig.suptitle(f"{args.n} questions from {args.chats} chats at once, Telegram webhook via "
                 f"nginx; {os.cpu_count()} shared cores, load {load[0]:.1f}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="questions per burst")
    parser.add_argument("--chats", type=int, default=20, help="chats asking them (new each round)")
    parser.add_argument("--rounds", type=int, default=3, help="bursts per configuration")
    parser.add_argument("--replicas", default="1,2,3", help="replica counts on PostgreSQL")
    parser.add_argument("--ref", help="also run the PostgreSQL configurations with this git "
                        "ref's bot (git archive), e.g. a branch wiring the replicas")
    parser.add_argument("--balance", choices=("least_conn", "round_robin"), default="least_conn")
    parser.add_argument("--database-url", default="",
                        help="a PostgreSQL server (default: a throwaway cluster)")
    parser.add_argument("--pause-s", type=float, default=1.0, help="pause before each burst")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment for every replica")
    parser.add_argument("--plot", help="write a PNG here")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
