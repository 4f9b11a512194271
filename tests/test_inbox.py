"""The durable inbox: the real ``python -m bot`` killed with SIGKILL in the middle of a burst on
the fake Bot API server loses no question and answers none twice after restart; redelivered
updates are dropped; a question left pending too long gets an apology."""
# ruff: noqa: F811  (the bot fixtures are imported from tests.test_bot_telegram)

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

import tests.test_bot_telegram as tbt
from bot.chat.inbox import ChannelInbox
from standins.telegram import FakeTelegram
from standins.whatsapp import FakeGraph, encode, sign, text_message
from tests.conftest import needs_tools
from tests.pgcluster import query_rows
from tests.test_bot_process import ROOT, bot_env, bot_process, free_port
from tests.test_bot_telegram import bot, bot_settings  # noqa: F401  (fixtures)

pytestmark = needs_tools("espeak-ng", "ffmpeg")

CHAT = 91
BURST = [
    "How much does an Xbox 360 cost?",
    "calories in a small cucumber",
    "Who is the Prime Minister of India?",
    "how healthy is cucumber water",
    "what is the weather in Goa right now",
    "what is the capital of Gujarat",
    "how many calories are in a banana",
    "who wrote the national anthem of India",
    "when did India become independent",
    "what is the tallest mountain in the world",
    "how long do you boil an egg",
    "what is the population of Ahmedabad",
]


def replies_by_message(tg: FakeTelegram) -> Counter:
    """How many sendMessage calls quote each message id."""
    return Counter(c.params["reply_parameters"]["message_id"] for c in tg.calls
                   if c.method == "sendMessage" and "reply_parameters" in c.params)


async def wait_until(predicate, timeout_s: float, step_s: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step_s)
    return True


async def kill_between_replies(proc, tg: FakeTelegram, db_target) -> None:
    """SIGKILL ``proc`` at a moment when no reply is half-sent: frozen with SIGSTOP, given
    0.1 s for what it already wrote to reach the server, then killed if every reply it marked
    ``sending`` (or done) has arrived, else let run 5 ms more. A reply whose request left the
    bot but had not reached Telegram when it died is the one thing the inbox cannot save (it
    is not sent twice; docs/operations.md), so the test does not kill inside that window
    (for at most 10 s: without an inbox nothing is ever marked, and it kills anyway)."""
    deadline = time.monotonic() + 10
    while True:
        proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(0.1)
        [(n_marked,)] = query_rows(
            db_target, "SELECT COUNT(*) FROM inbox WHERE status = 'sending' OR outcome LIKE ?",
            ("replied%",))
        if n_marked == len(replies_by_message(tg)) or time.monotonic() > deadline:
            proc.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL
            return
        proc.send_signal(signal.SIGCONT)
        await asyncio.sleep(0.005)


async def test_sigkill_mid_burst_then_restart_answers_every_question_exactly_once(
        tmp_path, sample_index_dir, db_target):
    """On SQLite (``BOT_DB_PATH``) and on PostgreSQL (``BOT_DATABASE_URL``)."""
    log_path = tmp_path / "bot.log"
    async with FakeTelegram() as tg:
        if isinstance(db_target, Path):
            env = bot_env(tg, sample_index_dir, db_target)
        else:
            env = bot_env(tg, sample_index_dir, tmp_path / "unused.sqlite3") | {
                "BOT_DATABASE_URL": db_target}
        async with bot_process(tg, env, log_path) as proc:
            updates = [await tg.push_text(CHAT, q) for q in BURST]
            # the moment the issue describes: the whole batch confirmed to Telegram (the next
            # getUpdates offset went out) and the first reply sent, the rest still in the works
            assert await wait_until(lambda: not tg.pending_updates and replies_by_message(tg),
                                    timeout_s=60)
            await kill_between_replies(proc, tg, db_target)
        before = replies_by_message(tg)
        decided_before_kill = {i for (i,) in query_rows(db_target, "SELECT id FROM decisions")}
        print(f"answered before SIGKILL: {sum(before.values())} of {len(BURST)}")
        assert not tg.pending_updates, "Telegram would redeliver: the test proves nothing"
        assert 1 <= sum(before.values()) < len(BURST), before

        message_ids = [u["message"]["message_id"] for u in updates]
        async with bot_process(tg, env, log_path):
            assert await wait_until(lambda: set(replies_by_message(tg)) >= set(message_ids),
                                    timeout_s=90, step_s=0.05), replies_by_message(tg)
            await asyncio.sleep(1.5)  # room for a duplicate to show up
        after = replies_by_message(tg)

    assert {m: after[m] for m in message_ids} == dict.fromkeys(message_ids, 1)
    inbox = [(int(key.split("/")[1]), status, outcome) for key, status, outcome in
             query_rows(db_target, "SELECT message_key, status, outcome FROM inbox")]
    decisions = query_rows(db_target, "SELECT id, message_id FROM decisions")
    assert sorted(m for m, _, _ in inbox) == sorted(message_ids)
    assert all(status == "done" for _, status, _ in inbox), inbox
    # every answered question has its decision recorded, and each decision is in the log
    replied = {m for m, _, outcome in inbox if outcome.startswith("replied")}
    assert {m for _, m in decisions} >= replied
    # one decision per question (a replay reuses one recorded before the kill), and every
    # decision in the text log too, but those whose line the kill cut off
    assert sorted(m for _, m in decisions) == sorted(message_ids)
    log_text = log_path.read_text("utf-8")
    logged = {int(i) for i in re.findall(r" decision id=(\d+) ", log_text)}
    assert logged <= {i for i, _ in decisions}
    assert {i for i, _ in decisions} - logged <= decided_before_kill
    # Telegram redelivered nothing: every question unanswered at the kill came from the inbox
    # (replayed at start-up on SQLite; on PostgreSQL taken by the restarted replica's
    # dispatcher, at once or once the dead one's lease expired: bot.chat.dispatch)
    after_restart = log_text[log_text.rindex("services open "):]
    n_replayed = len(re.findall(r"inbox_replay channel=telegram |inbox_taken channel=telegram ",
                                after_restart))
    assert n_replayed >= len(BURST) - sum(before.values())
    assert "Traceback" not in log_text
    assert not (tmp_path / "unused.sqlite3").exists()  # PostgreSQL: BOT_DB_PATH unused


# ------------------------------------------------------- in process: duplicates, stale updates

async def test_redelivered_message_is_dropped_and_logged(bot, tg, bot_settings, caplog):
    caplog.set_level(logging.INFO, logger="bot.chat.inbox")
    first = await tg.push_text(tbt.CHAT, tbt.XBOX)
    await tg.wait_for("sendMessage", timeout=30)
    again = {k: v for k, v in first.items() if k != "update_id"}  # same message, new update
    await tg.push_update(again)
    await wait_until(lambda: any("inbox_duplicate_dropped" in r.getMessage()
                                 for r in caplog.records), timeout_s=10)
    await asyncio.sleep(0.5)
    assert len([c for c in tg.calls if c.method == "sendMessage"]) == 1
    await wait_until(lambda: sqlite3.connect(bot_settings.bot.db_path).execute(
        "SELECT status FROM inbox").fetchone()[0] == "done", timeout_s=10)
    with sqlite3.connect(bot_settings.bot.db_path) as conn:
        rows = conn.execute("SELECT message_key, status, outcome FROM inbox").fetchall()
    key = f"{tbt.CHAT}/{first['message']['message_id']}/0"
    assert rows == [(key, "done", rows[0][2])]
    assert rows[0][2].startswith("replied decision_id=")


async def test_question_older_than_the_max_age_gets_an_apology_not_an_answer(
        bot, tg, bot_settings):
    message = {"message_id": 7001, "date": int(time.time()) - 3600,
               "from": {"id": tbt.CHAT, "is_bot": False, "first_name": "Asha",
                        "language_code": "hi"},
               "chat": {"id": tbt.CHAT, "type": "private", "first_name": "Asha"},
               "text": tbt.XBOX}
    update = await tg.push_update({"message": message})
    [apology] = await tbt.replies(tg)
    assert apology == ("माफ़ कीजिए, यह सवाल मुझ तक बहुत देर से पहुँचा (मैं फिर से शुरू हो रहा "
                       "था)। कृपया इसे दोबारा पूछें।")

    def inbox_row() -> tuple[str, str]:
        with sqlite3.connect(bot_settings.bot.db_path) as conn:
            return conn.execute("SELECT status, outcome FROM inbox WHERE message_key = ?",
                                (f"{tbt.CHAT}/{update['message']['message_id']}/0",)).fetchone()

    await wait_until(lambda: inbox_row()[0] == "done", timeout_s=10)  # just after the reply
    status, outcome = inbox_row()
    with sqlite3.connect(bot_settings.bot.db_path) as conn:
        n_decisions = conn.execute("SELECT COUNT(*) FROM decisions").fetchone()[0]
    assert status == "done" and outcome.startswith("stale_apology age_s=36")
    assert n_decisions == 0


def stale_message(message_id: int, user_id: int, language_code: str = "en") -> dict:
    """A private text message from ``user_id`` sent an hour ago (beyond BOT_INBOX_MAX_AGE_S),
    as a replay after a long outage brings it."""
    return {"message_id": message_id, "date": int(time.time()) - 3600,
            "from": {"id": user_id, "is_bot": False, "first_name": "Asha",
                     "language_code": language_code},
            "chat": {"id": user_id, "type": "private", "first_name": "Asha"}, "text": tbt.XBOX}


def inbox_outcome(bot_settings, chat_id: int, message_id: int) -> tuple[str, str] | None:
    with sqlite3.connect(bot_settings.bot.db_path) as conn:
        return conn.execute("SELECT status, outcome FROM inbox WHERE message_key = ?",
                            (f"{chat_id}/{message_id}/0",)).fetchone()


async def test_too_late_apology_honours_the_chats_lang_and_goes_through_the_outbox(
        bot, tg, bot_settings, monkeypatch):
    """Issue 33: an English-speaking user who chose ``/lang hi`` gets the Hindi apology, sent
    by the channel's outbox like every other reply (marked ``sending`` before it leaves)."""
    await tg.push_text(tbt.CHAT, "/lang hi")
    await tbt.replies(tg)
    outbox = bot.bot_data["outbox"]
    sent_by_outbox: list[tuple[int, list[str]]] = []
    send_text = outbox.send_text

    async def recording(asker, texts, on_wire):
        sent_by_outbox.append((asker.chat_id, [str(text) for text in texts]))
        return await send_text(asker, texts, on_wire)

    monkeypatch.setattr(outbox, "send_text", recording)
    await tg.push_update({"message": stale_message(7002, tbt.CHAT, language_code="en")})
    [apology] = await tbt.replies(tg)
    hindi = ("माफ़ कीजिए, यह सवाल मुझ तक बहुत देर से पहुँचा (मैं फिर से शुरू हो रहा "
             "था)। कृपया इसे दोबारा पूछें।")
    assert apology == hindi
    assert sent_by_outbox == [(tbt.CHAT, [hindi])]
    await wait_until(lambda: inbox_outcome(bot_settings, tbt.CHAT, 7002)[0] == "done",
                     timeout_s=10)
    assert inbox_outcome(bot_settings, tbt.CHAT, 7002)[1].startswith("stale_apology age_s=36")


async def test_too_late_message_from_a_stranger_gets_no_apology(tg, bot_settings,
                                                                fake_pipeline):
    """Issue 33: the allow-list comes first, as for any answer: a stranger's stale message is
    closed in the inbox with nothing sent; the allowed user's one gets the apology."""
    settings = replace(bot_settings, bot=replace(bot_settings.bot, allowed_user_ids=(tbt.CHAT,)))
    async with tbt.running(settings, fake_pipeline):
        await tg.push_update({"message": stale_message(7003, tbt.CHAT + 1)})
        assert await wait_until(
            lambda: (inbox_outcome(settings, tbt.CHAT + 1, 7003) or ("",))[0] == "done",
            timeout_s=20, step_s=0.05)
        await tg.push_update({"message": stale_message(7004, tbt.CHAT)})
        [apology] = await tbt.replies(tg)
    assert apology.startswith("Sorry, this question reached me too late")
    [sent] = [c for c in tg.calls if c.method == "sendMessage"]
    assert int(sent.params["chat_id"]) == tbt.CHAT
    status, outcome = inbox_outcome(settings, tbt.CHAT + 1, 7003)
    assert outcome.startswith("stale_not_allowed")


async def accepting(port: int, timeout_s: float = 30.0) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections: PTB calls setWebhook (the bot's ready
    signal) just before its webhook server starts listening, so a POST sent at once can be
    refused."""
    deadline_s = time.monotonic() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline_s:
                raise
            await asyncio.sleep(0.05)
        else:
            writer.close()
            await writer.wait_closed()
            return


async def test_webhook_commits_before_200_and_a_retried_post_is_answered_once(
        tmp_path, sample_index_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram"
    db_path = tmp_path / "bot.sqlite3"
    async with FakeTelegram() as tg:
        env = bot_env(tg, sample_index_dir, db_path) | {
            "TELEGRAM_WEBHOOK_URL": url, "TELEGRAM_WEBHOOK_SECRET": "s3cret",
            "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1", "TELEGRAM_WEBHOOK_PORT": str(port)}
        async with bot_process(tg, env, tmp_path / "bot.log", ready_method="setWebhook"):
            message = {"message_id": 501, "date": int(time.time()), "text": tbt.XBOX,
                       "from": {"id": CHAT, "is_bot": False, "first_name": "A"},
                       "chat": {"id": CHAT, "type": "private", "first_name": "A"}}
            tg._chats[CHAT] = message["chat"]
            tg._messages[(CHAT, 501)] = message
            update = {"update_id": 9001, "message": message}
            headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
            await accepting(port)
            async with httpx.AsyncClient() as client:
                first = await client.post(url, json=update, headers=headers)
                with sqlite3.connect(db_path) as conn:  # committed before the 200 went out
                    stored = conn.execute("SELECT message_key FROM inbox").fetchall()
                second = await client.post(url, json=update, headers=headers)  # a retry
            assert (first.status_code, second.status_code) == (200, 200)
            assert stored == [(f"{CHAT}/501/0",)]
            await tg.wait_for("sendMessage", timeout=60)
            await asyncio.sleep(1.0)
        assert len([c for c in tg.calls if c.method == "sendMessage"]) == 1


# ------------------------------------------------------- WhatsApp: the same inbox, the same rule

WA_ID = "919800000077"
WA_SECRET = "kill-test-secret"


async def whatsapp_process(env: dict[str, str], log_path, port: int):
    """``python -m bot --whatsapp`` until its webhook answers /healthz."""
    with log_path.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "--whatsapp", cwd=ROOT, env=env, stdout=log,
            stderr=log)
    async with httpx.AsyncClient() as client:
        for _ in range(1200):
            try:
                if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            if proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
    pytest.fail("python -m bot --whatsapp not ready; log:\n" + log_path.read_text()[-3000:])


async def deliver_burst(port: int, wamids: list[str], *, is_killed: bool = False) -> None:
    """Meta's webhook POSTs: one per message of the burst, signed. With ``is_killed``, the bot
    dies during the burst: the POSTs stop at the first that gets no answer (Meta retries it)."""
    async with httpx.AsyncClient() as client:
        for wamid, question in zip(wamids, BURST, strict=True):
            body = encode(text_message(WA_ID, question, message_id=wamid))
            try:
                response = await client.post(
                    f"http://127.0.0.1:{port}/webhook", content=body,
                    headers={"Content-Type": "application/json",
                             "X-Hub-Signature-256": sign(body, WA_SECRET)})
            except httpx.HTTPError:
                if is_killed:
                    return
                raise
            assert response.status_code == 200


async def test_whatsapp_sigkill_after_the_first_reply_then_redelivery_answers_each_once(
        tmp_path, sample_index_dir):
    db_path, log_path = tmp_path / "bot.sqlite3", tmp_path / "bot.log"
    wamids = [f"wamid.burst{n}" for n in range(len(BURST))]
    async with FakeGraph() as graph:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WHATSAPP_")} | {
            "PYTHONUNBUFFERED": "1", "VOICE_RAG_INDEX_DIR": str(sample_index_dir),
            "BOT_DB_PATH": str(db_path), "BOT_RATE_LIMIT_N": "0", "BOT_REPEAT_WINDOW_S": "0",
            "SARVAM_API_KEY": "unused", "WHATSAPP_TOKEN": graph.token,
            "WHATSAPP_PHONE_NUMBER_ID": graph.phone_number_id, "WHATSAPP_APP_SECRET": WA_SECRET,
            "WHATSAPP_VERIFY_TOKEN": "v", "WHATSAPP_API_BASE": graph.url,
            "WHATSAPP_API_VERSION": graph.version, "WHATSAPP_LISTEN": "127.0.0.1",
            "WHATSAPP_PORT": str(port)}
        proc = await whatsapp_process(env, log_path, port)
        try:
            # killed the moment the first reply reaches WhatsApp: sent, but the bot never
            # heard back, so it could not record that it was done
            graph.on_sent = lambda _sent: proc.returncode is None and proc.send_signal(
                signal.SIGKILL)
            await deliver_burst(port, wamids, is_killed=True)
            assert await asyncio.wait_for(proc.wait(), 60) == -signal.SIGKILL
            graph.on_sent = None
            n_before = len(graph.delivered("text"))
            print(f"answered before SIGKILL: {n_before} of {len(BURST)}")
            assert 1 <= n_before < len(BURST)

            proc = await whatsapp_process(env, log_path, port)
            await deliver_burst(port, wamids)  # Meta redelivers the whole burst
            await graph.wait_for(len(BURST), timeout=120)
            await asyncio.sleep(1.0)  # room for a duplicate to show up
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), 30)
        answers = [s.body["text"]["body"] for s in graph.delivered("text")]
    assert len(answers) == len(BURST), answers  # each answered exactly once
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT message_key, status, outcome FROM inbox WHERE "
                            "channel = 'whatsapp' ORDER BY id").fetchall()
    assert [key for key, _, _ in rows] == wamids
    assert all(status == "done" for _, status, _ in rows), rows
    log_text = log_path.read_text("utf-8")
    # the answered message was redelivered too, and dropped; it was not replayed either
    assert "whatsapp_duplicate message_id=wamid.burst" in log_text
    assert log_text.count("inbox_replay_skipped channel=whatsapp") == 1
    assert "Traceback" not in log_text


async def test_one_process_answers_a_chats_messages_one_at_a_time_in_order():
    """One process: a chat's messages wait for its turn, in the order their handling began,
    while another chat's go at once; the turns are forgotten when no message holds them."""
    inbox = ChannelInbox(store=None, channel="whatsapp", max_age_s=60)
    events = []

    async def answer(chat_id: int, n: int) -> None:
        async with inbox.in_turn(chat_id):
            events.append(("start", chat_id, n))
            await asyncio.sleep(0.01)
            events.append(("end", chat_id, n))

    await asyncio.gather(*(answer(1, n) for n in range(3)), answer(2, 0))

    assert [e for e in events if e[1] == 1] == [
        (edge, 1, n) for n in range(3) for edge in ("start", "end")]
    assert events.index(("start", 2, 0)) < events.index(("end", 1, 0))
    assert inbox._turns == {}
