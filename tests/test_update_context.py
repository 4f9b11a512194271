"""The per-update step (``bot.chat.context``): settings and language read once, the rate limit
decided once, and the busy indicator ("typing…") shown exactly for what the limit let through."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from bot.chat.commands import help_reply, lang_reply, mode_reply
from bot.chat.messages import t
from bot.chat.questions import answer_text, answer_voice
from bot.chat.ratelimit import RateLimiter
from bot.chat.services import Services
from bot.chat.state import InProcessState
from bot.chat.types import Asker, VoiceNote
from bot.settings import Settings

XBOX = "How much does an Xbox 360 cost?"
NOW_S = 1000.0  # the services' clock stands still: every wait is the whole window
WINDOW_S = 60


def texts(reply) -> list[str]:
    """The reply's messages as plain text."""
    return [str(text) for text in reply.messages]


class Indicator:
    """A busy indicator (``bot.chat.context.Busy``) that counts how often it was shown."""

    def __init__(self) -> None:
        self.n_shown = 0

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[None]:
        self.n_shown += 1
        yield


async def _unfetchable() -> bytes:
    raise AssertionError("a refused voice note must not be downloaded")


@pytest.fixture
async def services(tmp_path, fake_settings, fake_pipeline) -> AsyncIterator[Services]:
    """Services over the fake pipeline, allowing 1 message per sender per minute."""
    settings = Settings.from_env({"BOT_DB_PATH": str(tmp_path / "bot.sqlite3"),
                                  "BOT_RATE_LIMIT_N": "1",
                                  "BOT_RATE_LIMIT_WINDOW_S": str(WINDOW_S)})
    opened = await Services.open(replace(settings, rag=fake_settings), fake_pipeline)
    assert isinstance(opened.state, InProcessState)  # SQLite: the in-memory limit
    opened.state = replace(opened.state, clock=lambda: NOW_S)
    yield opened
    await opened.close()


async def test_typing_shows_for_the_answered_question_and_never_for_a_limited_one(services):
    asker, typing = Asker("telegram", 42, user_id=42, message_id=1), Indicator()
    answered = await answer_text(services, asker, XBOX, busy=typing)
    assert answered.decision_id is not None and typing.n_shown == 1
    assert services.state.limiter.peek_wait_s(("telegram", 42), NOW_S) == WINDOW_S

    limited = await answer_text(services, replace(asker, message_id=2), "cucumber calories",
                                busy=typing)
    dropped = await answer_voice(services, replace(asker, message_id=3),
                                 VoiceNote(1000, 2.0, fetch=_unfetchable), busy=typing)
    assert texts(limited) == [t("rate_limited", "en", seconds=WINDOW_S)]
    assert texts(dropped) == []
    assert limited.decision_id is None and dropped.decision_id is None
    assert typing.n_shown == 1  # the indicator agrees with the answer: no typing, no answer
    assert (await services.db.last_decision("telegram", 42)).id == answered.decision_id


async def test_of_concurrent_questions_over_the_limit_only_the_answered_one_shows_typing(
        services):
    typing = Indicator()
    replies = await asyncio.gather(*(
        answer_text(services, Asker("telegram", 7, user_id=7, message_id=n), text, busy=typing)
        for n, text in enumerate([XBOX, "cucumber calories", "pollution in Hyderabad"])))
    assert sum(r.decision_id is not None for r in replies) == 1
    assert typing.n_shown == 1
    assert sorted(len(r.messages) for r in replies if r.decision_id is None) == [0, 1]


async def test_a_repeated_question_is_not_counted_against_the_limit(services):
    asker = Asker("telegram", 42, user_id=42, message_id=1)
    await answer_text(services, asker, XBOX)
    again = await answer_text(services, replace(asker, message_id=2), XBOX)
    assert texts(again) == [t("repeat_question", "en")]
    # the repeat was neither counted nor refused: the next refusal is still the first, a notice
    limited = await answer_text(services, replace(asker, message_id=3), "cucumber calories")
    assert texts(limited) == [t("rate_limited", "en", seconds=WINDOW_S)]


async def test_commands_speak_the_chat_language_and_count_against_the_limit(services):
    asker = Asker("telegram", 42, user_id=42, language_code="en")
    services.state = replace(services.state, limiter=RateLimiter(2, WINDOW_S))
    lang_set = await lang_reply(services, asker, "hi")
    helped = await help_reply(services, asker)
    limited = await mode_reply(services, asker, "generative")
    assert texts(lang_set) == [t("lang_set", "hi", language="हिंदी")]
    assert texts(helped) == [t("help", "hi")]
    assert texts(limited) == [t("rate_limited", "hi", seconds=WINDOW_S)]
    # /mode was refused
    assert (await services.db.get_chat_settings("telegram", 42)).mode == "extractive"


async def test_a_message_without_a_sender_is_never_limited(services):
    console = Asker("console", 0)  # the console's messages have no user
    replies = [await help_reply(services, console) for _ in range(3)]
    assert all(texts(r) == [t("help", "en")] for r in replies)
