"""Issue 24: replicas of the real bot behind nginx on one PostgreSQL database.

Three ``python -m bot`` (Telegram, webhook mode) and three ``python -m bot --whatsapp``
replicas (the real encoder and the sample index, memory-mapped by each) sit behind nginx
(:class:`standins.replicas.ReplicaSet`, ``deploy/nginx.conf.j2``), which spreads the fake
Telegram server's and the WhatsApp stand-in's webhook POSTs across them. A burst of 120
questions (20 Telegram chats and 20 WhatsApp chats, 3 questions each) goes through while one
replica of each kind is SIGKILLed, or while PostgreSQL restarts: every question is answered
exactly once, in order within each chat, with its decision recorded; and a stranger's messages,
spread across replicas, meet one rate limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from standins.replicas import Replica, ReplicaSet
from standins.telegram import FakeTelegram
from standins.whatsapp import FakeGraph, text_message
from tests.conftest import needs_tools
from tests.pgcluster import query_rows
from tests.test_inbox import BURST, wait_until

pytestmark = [
    pytest.mark.slow, pytest.mark.postgres,
    needs_tools("espeak-ng", "ffmpeg", "nginx"),
]

QUESTIONS = BURST[:7]  # the inbox tests' questions: answered from the sample
N_CHATS = 20
N_PER_CHAT = 3
TG_CHATS = [5000 + i for i in range(N_CHATS)]
WA_CHATS = [f"9198000{i:05d}" for i in range(N_CHATS)]
LEASE_S = 3.0
WA_SECRET = "replica-test-secret"
READY_TIMEOUT_S = 180.0  # six processes loading the encoder and index on a busy 2-core box


def base_env(tg: FakeTelegram, graph: FakeGraph, index_dir: Path, folder: Path
             ) -> dict[str, str]:
    """The replicas' environment besides what :class:`ReplicaSet` sets (database URL, webhook
    URL, secret, ports and paths); none of this process's ``TELEGRAM_*``, ``WHATSAPP_*`` or
    ``BOT_*`` variables reach them (``inherit_bot_env=False``)."""
    return {
        "VOICE_RAG_INDEX_DIR": str(index_dir), "SARVAM_API_KEY": "unused",
        "BOT_DB_PATH": str(folder / "unused.sqlite3"),
        "BOT_VOICE_CACHE_DIR": str(folder / "voice-cache"),
        "BOT_INBOX_LEASE_S": str(LEASE_S), "BOT_INBOX_SWEEP_S": "0.5",
        "BOT_PIPELINE_THREADS": "1",
        "TELEGRAM_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url,
        "TELEGRAM_FILE_BASE": tg.base_file_url,
        "WHATSAPP_TOKEN": graph.token, "WHATSAPP_PHONE_NUMBER_ID": graph.phone_number_id,
        "WHATSAPP_APP_SECRET": WA_SECRET, "WHATSAPP_VERIFY_TOKEN": "v",
        "WHATSAPP_API_BASE": graph.url, "WHATSAPP_API_VERSION": graph.version,
    }


@contextlib.asynccontextmanager
async def replicas(tmp_path: Path, index_dir: Path, pg_url: str, **env: str
                   ) -> AsyncIterator[tuple[FakeTelegram, FakeGraph, ReplicaSet]]:
    async with FakeTelegram() as tg, FakeGraph() as graph:
        folder = tmp_path / "replicas"
        rs = ReplicaSet(n_telegram=3, n_whatsapp=3, database_url=pg_url, work_dir=folder,
                        env=base_env(tg, graph, index_dir, folder) | env,
                        ready_timeout_s=READY_TIMEOUT_S, inherit_bot_env=False)
        try:
            start = time.monotonic()
            await rs.start()
            await tg.wait_for("setWebhook", 3, timeout=60)
            assert tg.webhook["url"] == rs.telegram_webhook_url
            graph.subscribe(rs.whatsapp_webhook_url, WA_SECRET)
            print(f"6 replicas and nginx ready in {time.monotonic() - start:.1f} s")
            yield tg, graph, rs
        finally:
            await rs.stop()


def tg_replies(tg: FakeTelegram) -> list[tuple[int, int]]:
    """(chat id, quoted message id) of every sendMessage quoting a question, in order."""
    return [(int(c.params["chat_id"]), c.params["reply_parameters"]["message_id"])
            for c in tg.calls if c.method == "sendMessage" and "reply_parameters" in c.params]


def wa_replies(graph: FakeGraph) -> list[str]:
    """The number each text reply went to, in order."""
    return [s.body["to"] for s in graph.delivered("text")]


async def kill_between_replies(rs: ReplicaSet, victims: list[Replica], tg: FakeTelegram,
                               graph: FakeGraph, pg_url: str) -> None:
    """SIGKILL ``victims`` at a moment when no reply is half-sent: every replica frozen with
    SIGSTOP, given 0.2 s for what it already wrote to reach the stand-ins, then the victims
    killed if every reply marked ``sending`` (or done) has arrived, else all let run 5 ms
    more. A reply whose request had left a replica but not reached the channel when it died is
    the one thing the inbox cannot save (never sent twice: docs/operations.md), so the test
    does not kill inside that window (for at most 20 s; then it kills anyway)."""
    deadline = time.monotonic() + 20
    while True:
        rs.signal_all(signal.SIGSTOP)
        await asyncio.sleep(0.2)
        [(n_marked,)] = query_rows(
            pg_url, "SELECT COUNT(*) FROM inbox WHERE status = 'sending' OR outcome LIKE ?",
            ("replied%",))
        if n_marked == len(tg_replies(tg)) + len(wa_replies(graph)) \
                or time.monotonic() > deadline:
            for victim in victims:
                victim.signal(signal.SIGKILL)
            for victim in victims:
                assert await asyncio.wait_for(rs.kill(victim), 10) == -signal.SIGKILL
            rs.signal_all(signal.SIGCONT)
            return
        rs.signal_all(signal.SIGCONT)
        await asyncio.sleep(0.005)


async def run_burst(tg: FakeTelegram, graph: FakeGraph, rs: ReplicaSet, pg_url: str,
                    disrupt: Callable[[], object]) -> dict[int, list[int]]:
    """Push the burst (round by round, every chat), call ``disrupt`` once a third of the
    replies arrived, wait for every answer; returns each Telegram chat's question ids."""
    questions: dict[int, list[int]] = defaultdict(list)
    for k in range(N_PER_CHAT):
        for i, (chat, wa_id) in enumerate(zip(TG_CHATS, WA_CHATS, strict=True)):
            text = QUESTIONS[(i + k) % len(QUESTIONS)]
            update = await tg.push_text(chat, text)
            questions[chat].append(update["message"]["message_id"])
            graph.push(text_message(wa_id, text, message_id=f"wamid.{wa_id}.{k}"))
    n_total = 2 * N_CHATS * N_PER_CHAT
    start = time.monotonic()
    assert await wait_until(lambda: len(tg_replies(tg)) + len(wa_replies(graph)) >= n_total // 3,
                            timeout_s=120, step_s=0.01)
    n_before = len(tg_replies(tg)) + len(wa_replies(graph))
    await disrupt()
    print(f"disrupted after {n_before} of {n_total} replies, "
          f"{time.monotonic() - start:.1f} s into the burst")

    def is_done() -> bool:
        [(n_open,)] = query_rows(pg_url, "SELECT COUNT(*) FROM inbox WHERE status <> 'done'")
        return (n_open == 0 and not tg.pending_updates and not graph.pending_webhooks
                and len(tg_replies(tg)) >= N_CHATS * N_PER_CHAT
                and len(wa_replies(graph)) >= N_CHATS * N_PER_CHAT)

    assert await wait_until(is_done, timeout_s=120, step_s=0.2), (
        len(tg_replies(tg)), len(wa_replies(graph)),
        query_rows(pg_url, "SELECT channel, message_key, status, claimed_by FROM inbox "
                           "WHERE status <> 'done'"))
    print(f"burst answered in {time.monotonic() - start:.1f} s")
    await asyncio.sleep(1.5)  # room for a duplicate to show up
    return questions


def assert_each_answered_once_in_order(tg: FakeTelegram, graph: FakeGraph, pg_url: str,
                                       questions: dict[int, list[int]]) -> None:
    # Telegram: one reply quoting each question, each chat's in the order asked
    replies = tg_replies(tg)
    assert Counter(replies) == Counter((chat, m) for chat, ids in questions.items()
                                       for m in ids), "a question unanswered or answered twice"
    for chat, ids in questions.items():
        assert [m for c, m in replies if c == chat] == ids, f"chat {chat} out of order"
    # WhatsApp: three replies per chat; each message answered by a decision, recorded in the
    # order the chat's messages were received (one at a time: the next is taken only once the
    # previous reply went out)
    assert Counter(wa_replies(graph)) == dict.fromkeys(WA_CHATS, N_PER_CHAT)
    rows = query_rows(pg_url, "SELECT channel, chat_id, message_key, status, outcome, "
                              "decision_id FROM inbox ORDER BY id")
    assert len(rows) == 2 * N_CHATS * N_PER_CHAT
    assert all(status == "done" for _, _, _, status, _, _ in rows), rows
    by_chat: dict[tuple[str, int], list[int]] = defaultdict(list)
    for channel, chat_id, _key, _status, outcome, decision_id in rows:
        assert decision_id is not None or outcome.startswith("reply_in_flight"), (chat_id,
                                                                                 outcome)
        if decision_id is not None:
            by_chat[(channel, chat_id)].append(decision_id)
    for chat, decision_ids in by_chat.items():
        assert decision_ids == sorted(decision_ids), f"{chat}: decided out of order"
    # every decision logged: one per question, in the decision log and the inbox
    decided = {d for (d,) in query_rows(pg_url, "SELECT id FROM decisions")}
    assert {d for ids in by_chat.values() for d in ids} <= decided


def assert_spread(rs: ReplicaSet) -> None:
    """Every replica that lived received webhook POSTs (nginx spread them)."""
    for replica in rs.replicas:
        assert "inbox_stored" in replica.log(), (
            f"{replica.kind} replica on {replica.port} got nothing")


async def test_sigkill_one_replica_of_each_mid_burst_answers_every_question_once_in_order(
        tmp_path, sample_index_dir, pg_url):
    async with replicas(tmp_path, sample_index_dir, pg_url,
                        BOT_RATE_LIMIT_N="0") as (tg, graph, rs):
        victims = [rs.telegram[0], rs.whatsapp[0]]
        questions = await run_burst(
            tg, graph, rs, pg_url, lambda: kill_between_replies(rs, victims, tg, graph, pg_url))
        logs = rs.logs()
    assert_each_answered_once_in_order(tg, graph, pg_url, questions)
    assert_spread(rs)
    holders = {h for (h,) in query_rows(pg_url, "SELECT DISTINCT claimed_by FROM inbox")}
    assert len(holders) >= 4, holders  # answered by several replicas of each kind
    assert "Traceback" not in logs
    await assert_the_dashboard_reads_what_the_replicas_wrote(pg_url)


async def assert_the_dashboard_reads_what_the_replicas_wrote(pg_url: str) -> None:
    """Issue 43: the operator's dashboard and ``/metrics`` over the PostgreSQL database the
    replicas just wrote: every decision counted once, by channel and status, as the database
    has them, and the questions page lists them."""
    from aiohttp.test_utils import TestClient, TestServer
    from prometheus_client.parser import text_string_to_metric_families

    from bot.dashboard import DashboardSettings, create_app

    by_key = {(channel, status): n for channel, status, n in query_rows(
        pg_url, "SELECT channel, status, COUNT(*) FROM decisions GROUP BY channel, status")}
    app = create_app(DashboardSettings(database_url=pg_url, index_dir=Path("no-such-index")))
    async with TestClient(TestServer(app, host="127.0.0.1")) as http:
        metrics = await (await http.get("/metrics")).text()
        page = await http.get("/")
        assert page.status == 200
    counted: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "voice_rag_questions_total":
                key = (sample.labels["channel"], sample.labels["status"])
                counted[key] = counted.get(key, 0) + sample.value
    assert counted == by_key and sum(by_key.values()) > 0


GRACE_S = 30.0
"""The grace period a SIGTERMed replica gets before SIGKILL: Kubernetes' default
(``terminationGracePeriodSeconds``) and ``standins.replicas.STOP_TIMEOUT_S``."""


async def test_sigterm_one_replica_of_each_mid_burst_exits_in_its_grace_period_losing_nothing(
        tmp_path, sample_index_dir, pg_url):
    """Issue 30: a replica told to stop mid-burst lets its answers under way finish, stops its
    background loops (prune, sweep, lease renewal) and exits within the grace period; the
    others answer what it left, each question once, in order."""
    async with replicas(tmp_path, sample_index_dir, pg_url,
                        BOT_RATE_LIMIT_N="0") as (tg, graph, rs):
        victims = [rs.telegram[0], rs.whatsapp[0]]
        exits: list[tuple[int | None, float]] = []

        async def terminate() -> None:
            start = time.monotonic()
            for victim in victims:
                victim.signal(signal.SIGTERM)
            for victim in victims:
                assert victim.process is not None
                code = await asyncio.wait_for(victim.process.wait(), GRACE_S)
                exits.append((code, time.monotonic() - start))
            print(f"SIGTERMed replicas exited: {exits}")

        questions = await run_burst(tg, graph, rs, pg_url, terminate)
        logs = rs.logs()
        victim_logs = [victim.log() for victim in victims]
    assert [code for code, _ in exits] == [0, 0], exits
    assert_each_answered_once_in_order(tg, graph, pg_url, questions)
    assert "Traceback" not in logs
    for log_text in victim_logs:
        assert "inbox_stored" in log_text  # each was answering when told to stop


async def test_postgresql_restart_mid_burst_loses_nothing_acknowledged(
        tmp_path, sample_index_dir, pg_url, pg_cluster):
    async with replicas(tmp_path, sample_index_dir, pg_url,
                        BOT_RATE_LIMIT_N="0") as (tg, graph, rs):
        async def restart() -> None:
            start = time.monotonic()
            await asyncio.to_thread(pg_cluster.restart)
            print(f"PostgreSQL restarted in {time.monotonic() - start:.1f} s")

        questions = await run_burst(tg, graph, rs, pg_url, restart)
        logs = rs.logs()
    assert_each_answered_once_in_order(tg, graph, pg_url, questions)
    assert_spread(rs)
    # the restart was felt: an answer deferred, a chat's turn retried or a webhook refused
    assert any(line in logs for line in ("answer_deferred", "inbox_dispatch_failed",
                                         "webhook_unstored"))


async def test_a_strangers_messages_spread_across_replicas_meet_one_rate_limit(
        tmp_path, sample_index_dir, pg_url):
    n_messages, limit = 24, 3
    async with replicas(tmp_path, sample_index_dir, pg_url, BOT_RATE_LIMIT_N=str(limit),
                        BOT_RATE_LIMIT_WINDOW_S="60", BOT_ALLOWED_USER_IDS="1",
                        WHATSAPP_ALLOWED_NUMBERS="1") as (tg, graph, rs):
        stranger_tg, stranger_wa = 4242, "919812345678"
        for n in range(n_messages):
            await tg.push_text(stranger_tg, f"let me in {n}")
            graph.push(text_message(stranger_wa, f"let me in {n}", message_id=f"wamid.s{n}"))

        def is_done() -> bool:
            [(n_done,)] = query_rows(pg_url, "SELECT COUNT(*) FROM inbox WHERE status = 'done'")
            return n_done == 2 * n_messages

        assert await wait_until(is_done, timeout_s=90, step_s=0.2)
        await asyncio.sleep(1.0)
    private = [c for c in tg.calls if c.method == "sendMessage"]
    assert len(private) == limit, [c.params.get("text") for c in private]
    assert len(graph.delivered("text")) == limit
    for kind, chat in (("telegram", stranger_tg), ("whatsapp", stranger_wa)):
        receivers = [r for r in rs.of(kind) if any(
            line for line in r.log().splitlines()
            if "inbox_stored" in line and f"chat_id={chat}" in line)]
        assert len(receivers) >= 2, f"{kind}: nginx did not spread the stranger's messages"
    logs = rs.logs()
    assert logs.count("not_allowed channel=telegram") == n_messages
    assert logs.count("not_allowed channel=whatsapp") == n_messages
    assert logs.count("reply=dropped") == 2 * (n_messages - limit)
