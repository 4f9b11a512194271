"""The conversation context of a chat (issue 44, ``bot.chat.conversation``), through the chat
layer's one entry for typed text (``bot.chat.questions.reply_to_text``) over the fake pipeline
(tests/fakes.py: ``FollowUpPipeline``, whose follow-up reading is a simple stand-in for the real
one): what is kept after each kind of outcome, how long, how many follow-ups in a row, and what
ends it. The front ends' own tests (Telegram, WhatsApp, web, console) check the same through
their transports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from bot.chat import conversation
from bot.chat.conversation import CONTEXT_TTL_S, MAX_FOLLOWUPS
from bot.chat.questions import reply_to_text
from bot.chat.render import PLAIN
from bot.chat.services import Services
from bot.chat.types import Asker
from bot.cli import main as bot_main
from bot.settings import BotSettings, Settings, TelegramSettings
from bot.terminal.ask import ask_once, format_result
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from rag.types import Reason, ReasonCode, Result, Status
from tests.conftest import ROOT

CUCUMBER = "How many calories are in a small cucumber?"
XBOX = "How much does an Xbox 360 cost?"
PM = "Who is the Prime Minister of India?"
BIG_ONE = "and a big one?"
"""Refused alone by the fake pipeline; after ``CUCUMBER`` searched as "calories small cucumber
big one" and answered from en-59804-*."""
T0 = 1_764_547_200.0
"""The tests' wall clock starts here (Unix seconds)."""


class Clock:
    """A wall clock the test moves: Unix seconds, from :data:`T0`."""

    def __init__(self) -> None:
        self.now_s = T0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def services(tmp_path, fake_settings, fake_pipeline, clock) -> AsyncIterator[Services]:
    """Services on the fake pipeline, their wall clock :func:`clock`."""
    opened = await Services.open(Settings(
        rag=fake_settings, sarvam=SarvamSettings(), openrouter=OpenRouterSettings(),
        telegram=TelegramSettings(), bot=BotSettings(db_path=tmp_path / "bot.sqlite3",
                                                     rate_limit_n=0),
    ), fake_pipeline)
    opened.wall_clock = clock
    try:
        yield opened
    finally:
        await opened.close()


ASKER = Asker("telegram", 42, user_id=42)


async def say(services: Services, text: str) -> str:
    """The reply to ``text`` typed in chat 42, as plain text."""
    reply = await reply_to_text(services, ASKER, text)
    return "\n\n".join(PLAIN.render(message) for message in reply.messages)


async def last_result(services: Services) -> Result:
    return (await services.db.last_decision(ASKER.channel, ASKER.chat_id)).result


async def context_of(services: Services):
    return await services.db.get_chat_context(ASKER.channel, ASKER.chat_id)


async def test_a_follow_up_leans_on_the_last_turn_and_the_next_context_is_its_search(services):
    assert await context_of(services) is None
    await say(services, CUCUMBER)
    first = await context_of(services)
    assert (first.question, first.lang, first.n_followups, first.at_s) == (CUCUMBER, "en", 0, T0)
    assert first.passage_ids and all(p.startswith("en-59804-") for p in first.passage_ids)
    assert first.answer == (await last_result(services)).answer != ""

    reply = await say(services, BIG_ONE)
    result = await last_result(services)
    assert "en-59804-" in reply and result.followup.is_followup
    assert (result.query, result.searched) == (BIG_ONE, "calories small cucumber big one")
    after = await context_of(services)
    assert (after.question, after.n_followups) == ("calories small cucumber big one", 1)


async def test_the_context_is_used_up_to_CONTEXT_TTL_S_after_the_last_turn_not_after(
        services, clock):
    await say(services, CUCUMBER)
    clock.now_s = T0 + CONTEXT_TTL_S
    await say(services, BIG_ONE)
    assert (await last_result(services)).followup.is_followup  # on the bound: still used
    clock.now_s += CONTEXT_TTL_S + 1  # counted from that follow-up, the last turn
    reply = await say(services, "and a huge one?")
    assert (await last_result(services)).followup is None  # read with no context at all
    assert "en-59804-" not in reply


async def test_after_MAX_FOLLOWUPS_in_a_row_the_next_message_is_read_alone_and_counts_anew(
        services):
    await say(services, CUCUMBER)
    follow_ups = ["and a big one?", "and a huge one?", "and the large ones?", "and a bigger one?"]
    assert len(follow_ups) == MAX_FOLLOWUPS + 1
    for n, text in enumerate(follow_ups[:MAX_FOLLOWUPS], start=1):
        assert "en-59804-" in await say(services, text)
        assert (await context_of(services)).n_followups == n
    await say(services, follow_ups[-1])
    assert (await last_result(services)).followup is None
    spent = await context_of(services)
    assert (spent.question, spent.n_followups) == ("and a bigger one?", 0)


async def test_a_refused_question_is_kept_without_passages_and_its_follow_up_leans_on_it(
        services):
    refusal = await say(services, PM)
    assert refusal.startswith("I could not find this in my sources")
    kept = await context_of(services)
    assert (kept.question, kept.passage_ids, kept.answer) == (PM, (), "")
    await say(services, "and his wife?")
    reading = (await last_result(services)).followup
    assert reading.is_followup and reading.searched == "prime minister india wife"


async def test_bad_input_and_errors_leave_the_context_as_it_was(services, clock):
    await say(services, CUCUMBER)
    kept = await context_of(services)
    clock.now_s += 60
    reply = await say(services, "??")
    assert (await last_result(services)).status is Status.REFUSED_BAD_INPUT, reply
    assert await context_of(services) == kept
    error = Result(Status.ERROR, BIG_ONE, "en", reason=Reason(ReasonCode.PIPELINE_ERROR, "x"))
    assert await conversation.remember(services, ASKER, error, kept) is None
    assert await context_of(services) == kept
    assert "en-59804-" in await say(services, BIG_ONE)  # the retry is read as the first try


async def test_new_and_a_changed_language_end_the_context_the_same_language_keeps_it(services):
    await say(services, CUCUMBER)
    assert (await say(services, "/new")).startswith("Starting afresh")
    assert await context_of(services) is None
    await say(services, CUCUMBER)
    await say(services, "/lang auto")  # the chat's language already: nothing changes
    assert await context_of(services) is not None
    await say(services, "/lang en")
    assert await context_of(services) is None
    assert "en-59804-" not in await say(services, BIG_ONE)


async def test_the_same_follow_up_after_another_question_is_answered_again_not_pointed_at(
        services):
    await say(services, CUCUMBER)
    assert "en-59804-" in await say(services, BIG_ONE)
    await say(services, XBOX)
    again = await say(services, BIG_ONE)  # within the 30 s repeat window, after another topic
    assert not again.startswith("You asked this a moment ago"), again
    assert (await last_result(services)).searched.startswith("xbox 360 cost")
    assert (await say(services, BIG_ONE)).startswith("You asked this a moment ago")  # a repeat


# ------------------------------------------------------- python -m bot ask --after (the CLI)


async def test_ask_after_reads_the_question_as_a_follow_up_and_says_so(fake_pipeline):
    printed = format_result(await ask_once(fake_pipeline, BIG_ONE, after=CUCUMBER))
    header, reading, reply = printed.split("\n")[:3]
    assert header.startswith("ANSWERED [en, extractive]")
    assert reading == "read as a follow-up, searched as: calories small cucumber big one"
    assert "en-59804-" in printed.split("trace:")[0]
    assert re.search(r"^  followup +used ", printed, re.MULTILINE), printed
    alone = await ask_once(fake_pipeline, BIG_ONE)
    assert alone.status is Status.REFUSED_NO_MATCH
    assert "follow-up" not in format_result(alone).split("\n")[1]
    data = json.loads(json.dumps((await ask_once(fake_pipeline, XBOX, after=CUCUMBER)).to_dict(),
                                 ensure_ascii=False))
    assert data["followup"] == {"is_followup": False, "searched": "",
                                "detail": "alone: 7 words > 6"}


def test_ask_with_a_blank_after_exits_2_and_says_what_it_needs(capsys):
    assert bot_main(["ask", "--after", "  ", BIG_ONE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --after needs the earlier question's text"), err


def test_python_m_bot_ask_after_prints_the_followup_in_json(settings):
    """The real pipeline over the sample index: ``followup`` is in the JSON, and either the
    pipeline read the question with the earlier one or the command said it cannot (this
    branch's Pipeline has no follow-up reading yet: ``followup_unread``)."""
    env = {"VOICE_RAG_INDEX_DIR": str(settings.index_dir), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "--after", XBOX, "and the xbox one?", "--json"],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    assert out["query"] == "and the xbox one?" and "followup" in out
    assert (out["followup"] is None) == ("followup_unread" in proc.stderr), proc.stderr


# ------------------------------------------------------------------ replicas (PostgreSQL)


async def test_replicas_on_one_postgresql_database_share_each_chats_context(
        pg_url, tmp_path, fake_settings, fake_pipeline):
    """The question answered by one replica is what another reads the follow-up with; /new on
    either ends it for both."""
    settings = Settings(
        rag=fake_settings, sarvam=SarvamSettings(), openrouter=OpenRouterSettings(),
        telegram=TelegramSettings(), bot=BotSettings(database_url=pg_url, rate_limit_n=0,
                                                     voice_cache_dir=tmp_path / "voices"))
    a = await Services.open(settings, fake_pipeline)
    b = await Services.open(settings, fake_pipeline)
    try:
        assert b.state.is_shared
        await reply_to_text(a, ASKER, CUCUMBER)
        reply = await reply_to_text(b, ASKER, BIG_ONE)
        assert "en-59804-" in PLAIN.render(reply.messages[0])
        assert (await last_result(a)).followup.is_followup
        await reply_to_text(a, ASKER, "/new")
        assert await b.db.get_chat_context(ASKER.channel, ASKER.chat_id) is None
    finally:
        await a.close()
        await b.close()
