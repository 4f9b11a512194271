"""The real entry point, ``python -m bot``, as a child process polling the fake Bot API server:
SIGKILL it mid-run, restart it, and check the decision log lost nothing already answered; and
its one-line exit when the Bot API cannot be reached or refuses the token."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from standins.postgres import free_port
from standins.telegram import FakeTelegram, parse_html
from storage.db import Database
from tests.conftest import needs_tools

pytestmark = needs_tools("espeak-ng", "ffmpeg")

ROOT = Path(__file__).resolve().parents[1]
CHAT = 77
QUESTIONS = [
    "How much does an Xbox 360 cost?",
    "calories in a small cucumber",
    "Who is the Prime Minister of India?",
    "how healthy is cucumber water",
    "what is the weather in Goa right now",
]
READY_TIMEOUT_S = 90  # loading the encoder and index on a busy 2-core machine


@contextlib.asynccontextmanager
async def bot_process(tg: FakeTelegram, env: dict[str, str], log_path: Path,
                      ready_method: str = "deleteWebhook"
                      ) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m bot`` talking to ``tg``; ready once it called ``ready_method``
    (deleteWebhook: polling started; setWebhook: webhook set)."""
    n_ready = tg.methods().count(ready_method)
    with log_path.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        try:
            await tg.wait_for(ready_method, timeout=READY_TIMEOUT_S)
        except TimeoutError:
            tail = log_path.read_text("utf-8", errors="replace")[-3000:]
            pytest.fail(f"python -m bot not ready in {READY_TIMEOUT_S} s; log:\n{tail}")
        assert tg.methods().count(ready_method) == n_ready + 1
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


def bot_env(tg: FakeTelegram, index_dir: Path, db_path: Path) -> dict[str, str]:
    return {
        **os.environ, "PYTHONUNBUFFERED": "1",
        "TELEGRAM_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url,
        "TELEGRAM_FILE_BASE": tg.base_file_url, "TELEGRAM_POLL_TIMEOUT_S": "1",
        "VOICE_RAG_INDEX_DIR": str(index_dir), "BOT_DB_PATH": str(db_path),
        "BOT_RATE_LIMIT_N": "0", "SARVAM_API_KEY": "unused",
    }


async def reply_to(tg: FakeTelegram, update: dict, timeout: float = 60) -> str:
    """The displayed text of the bot's reply quoting ``update``'s message."""
    message_id = update["message"]["message_id"]
    while True:
        [call] = await tg.wait_for("sendMessage", timeout=timeout)
        if call.params["reply_parameters"]["message_id"] == message_id:
            return parse_html(call.text)


async def test_decision_log_survives_sigkill_and_restart(tmp_path, sample_index_dir):
    db_path = tmp_path / "bot.sqlite3"
    log_path = tmp_path / "bot.log"
    async with FakeTelegram() as tg:
        env = bot_env(tg, sample_index_dir, db_path) | {"BOT_REPEAT_WINDOW_S": "0"}
        async with bot_process(tg, env, log_path) as proc:
            for question in QUESTIONS:
                await tg.push_text(CHAT, question)
            await tg.wait_for("sendMessage", 2, timeout=60)  # mid-run: more are in flight
            proc.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL
        answered = {c.params["reply_parameters"]["message_id"]
                    for c in tg.calls if c.method == "sendMessage"}

        with sqlite3.connect(db_path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            recorded = {row[0] for row in conn.execute("SELECT message_id FROM decisions")}
        assert answered <= recorded, "an answered question is missing from the log"

        async with bot_process(tg, env, log_path):
            # the durable inbox answers what the kill left unanswered (tests/test_inbox.py)
            for _ in range(600):
                with sqlite3.connect(db_path) as conn:
                    if not conn.execute("SELECT 1 FROM inbox WHERE status != 'done'").fetchone():
                        break
                await asyncio.sleep(0.1)
            why = await reply_to(tg, await tg.push_text(CHAT, "/why"))
            async with await Database.open(db_path) as db:
                last = await db.last_decision("telegram", CHAT)
            assert why.startswith("How I decided the last answer:")
            assert f"Question: {last.result.query}" in why
            assert "relevance_guard" in why

            answer = await reply_to(tg, await tg.push_text(CHAT, QUESTIONS[0]))
            assert "Sources" in answer
        async with await Database.open(db_path) as db:
            assert await db.count_decisions() >= len(recorded) + 1
    assert b"Traceback" not in log_path.read_bytes()


async def test_webhook_mode_sets_a_secret_and_answers_updates(tmp_path, sample_index_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram"
    async with FakeTelegram() as tg:
        env = bot_env(tg, sample_index_dir, tmp_path / "bot.sqlite3") | {
            "TELEGRAM_WEBHOOK_URL": url, "TELEGRAM_WEBHOOK_SECRET": "s3cret-Token_1",
            "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1", "TELEGRAM_WEBHOOK_PORT": str(port),
        }
        async with bot_process(tg, env, tmp_path / "bot.log", ready_method="setWebhook"):
            assert tg.webhook["url"] == url and tg.webhook["secret_token"] == "s3cret-Token_1"
            help_text = await reply_to(tg, await tg.push_text(CHAT, "/help"))
            assert "Ask me a question" in help_text
            async with httpx.AsyncClient() as client:
                forged = await client.post(url, json={"update_id": 1},
                                           headers={"X-Telegram-Bot-Api-Secret-Token": "no"})
            assert forged.status_code == 403
        assert not tg.polls  # never long-polled


UNREACHABLE = ("error: cannot reach the Telegram Bot API at {base}: {reason}; check the network, "
               "the token, or TELEGRAM_API_BASE")


async def run_bot(env: dict[str, str], timeout_s: float = 60) -> tuple[int, str]:
    """``python -m bot`` to its end: exit code and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout_s)
    return proc.returncode, stderr.decode("utf-8", errors="replace")


async def test_unreachable_bot_api_exits_2_with_one_line_and_no_traceback(
        tmp_path, sample_index_dir):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound but never listening: connections are refused
        base = f"http://127.0.0.1:{closed.getsockname()[1]}/bot"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TELEGRAM_")} | {
            "TELEGRAM_TOKEN": "123:ABC", "TELEGRAM_API_BASE": base,
            "VOICE_RAG_INDEX_DIR": str(sample_index_dir),
            "BOT_DB_PATH": str(tmp_path / "bot.sqlite3"), "SARVAM_API_KEY": "unused",
        }
        returncode, stderr = await run_bot(env)
    assert returncode == 2, stderr
    [line] = stderr.splitlines()
    pattern = re.escape(UNREACHABLE.format(base=base, reason="@")).replace(
        "@", r"httpx\.ConnectError: .+")
    assert re.fullmatch(pattern, line), line


async def test_wrong_token_exits_2_with_one_line_that_does_not_show_the_token(
        tmp_path, sample_index_dir):
    async with FakeTelegram() as tg:
        env = bot_env(tg, sample_index_dir, tmp_path / "bot.sqlite3") | {
            "TELEGRAM_TOKEN": "123:wrong-token"}
        returncode, stderr = await run_bot(env)
        expected = UNREACHABLE.format(base=tg.base_url,
                                      reason="the token was refused (Unauthorized)")
    assert returncode == 2, stderr
    assert stderr.splitlines() == [expected]
    assert "wrong-token" not in stderr


async def test_missing_ffmpeg_exits_2_with_one_line(tmp_path, sample_index_dir):
    python_only = tmp_path / "bin"  # a PATH with this Python and nothing else
    python_only.mkdir()
    (python_only / "python3").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELEGRAM_")} | {
        "PATH": str(python_only), "TELEGRAM_TOKEN": "123:ABC",
        "VOICE_RAG_INDEX_DIR": str(sample_index_dir), "BOT_DB_PATH": str(tmp_path / "db"),
    }
    returncode, stderr = await run_bot(env)
    assert returncode == 2, stderr
    assert stderr.splitlines() == [
        "error: ffmpeg is not installed, so voice notes cannot be decoded: apt-get install "
        "ffmpeg (pip's ffmpeg-python is not ffmpeg)"]


async def test_unusable_database_path_exits_2_with_one_line(tmp_path, sample_index_dir):
    async with FakeTelegram() as tg:
        env = bot_env(tg, sample_index_dir, tmp_path)  # a folder, not a file
        returncode, stderr = await run_bot(env, timeout_s=READY_TIMEOUT_S)
    assert returncode == 2, stderr
    assert "Traceback" not in stderr and "Exception" not in stderr, stderr
    # after the start-up log lines (the Bot API answered), one error line
    assert stderr.splitlines()[-1].startswith(
        f"error: cannot open the database {tmp_path} (BOT_DB_PATH): ")


async def test_truncated_index_file_stops_start_up_with_one_line_and_exit_2(
        tmp_path, sample_passages, encoder):
    from rag.index import SearchParams
    from ragtools.index_build import build_index

    index_dir = tmp_path / "index"
    build_index(sample_passages[:40], encoder, index_dir, SearchParams(exact=True),
                show_progress=False)
    graph = index_dir / "index-all.usearch"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
    async with FakeTelegram() as tg:
        env = bot_env(tg, index_dir, tmp_path / "bot.sqlite3")
        returncode, stderr = await run_bot(env, timeout_s=READY_TIMEOUT_S)
    assert returncode == 2, stderr
    assert "Traceback" not in stderr, stderr
    last = stderr.splitlines()[-1]
    assert last.startswith(f"error: {graph} cannot be read, truncated or damaged"), last
    assert last.endswith(f"rebuild it with `python -m ragtools --index {index_dir} build-index`")
