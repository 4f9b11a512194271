"""Issue #23, channel-free parts: chats keyed by (channel, chat_id) through the chat layer, and
a reply bounded once for every channel (text and voice)."""

from __future__ import annotations

import io
import re
import wave
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from bot.chat.commands import lang_reply, why_reply
from bot.chat.limits import MAX_ANSWER_CHARS, MAX_SPEECH_CHARS, MAX_VOICE_REPLY_S
from bot.chat.questions import answer_text, reply_to_text
from bot.chat.services import Services
from bot.chat.state import InProcessState
from bot.chat.types import Asker
from bot.chat.voice_reply import encode_voice_note
from bot.settings import Settings
from bot.telegram.markup import to_html
from bot.whatsapp.markup import to_whatsapp
from rag.types import Citation, Result, Status, Trace
from tests.conftest import needs_tools

XBOX = "How much does an Xbox 360 cost?"
SENTENCE = "The Xbox 360 cost 299 dollars at launch in 2005. "


@pytest.fixture
async def services(tmp_path, fake_settings, fake_pipeline) -> AsyncIterator[Services]:
    settings = Settings.from_env({"BOT_DB_PATH": str(tmp_path / "bot.sqlite3"),
                                  "BOT_RATE_LIMIT_N": "0"})
    opened = await Services.open(replace(settings, rag=fake_settings), fake_pipeline)
    yield opened
    await opened.close()


async def test_a_whatsapp_chat_and_a_telegram_chat_with_one_id_share_nothing(services):
    telegram, whatsapp = Asker("telegram", 42, user_id=42), Asker("whatsapp", 42, user_id=42)
    await lang_reply(services, telegram, "hi")
    answered = await answer_text(services, whatsapp, XBOX)

    assert (await services.db.get_chat_settings("whatsapp", 42)).lang == "auto"
    assert (await services.db.get_chat_settings("telegram", 42)).lang == "hi"
    assert (await services.db.last_decision("telegram", 42)) is None
    stored = await services.db.last_decision("whatsapp", 42)
    assert stored.id == answered.decision_id and stored.channel == "whatsapp"
    [why_telegram] = (await why_reply(services, telegram)).messages
    [why_whatsapp] = (await why_reply(services, whatsapp)).messages
    assert str(why_telegram) == "अभी बताने को कुछ नहीं है: पहले कोई सवाल पूछें।"
    assert str(why_whatsapp).startswith("How I decided the last answer:")


class LongAnswerer:
    """A generative answerer that writes 6,000 characters: one sentence 40 times, then more."""

    async def ask(self, query: str, **_kwargs) -> Result:
        answer = SENTENCE * 40 + " ".join(f"Detail number {n} is here." for n in range(200))
        trace = Trace()
        trace.add("generate", "ok", f"{len(answer)} chars", 1.0)
        return Result(Status.ANSWERED, query, "en", answer[:6000], "en",
                      citations=[Citation("en-1-1", "en", 0.9, SENTENCE)], top_score=0.9,
                      floor=0.84, mode="generative", trace=trace)


async def test_a_6000_character_generated_answer_is_bounded_in_text_and_voice(services):
    services.answerer = LongAnswerer()
    asker = Asker("whatsapp", 7, user_id=7)
    await services.db.set_chat_settings("whatsapp", 7, mode="generative", voice="on")
    reply = await answer_text(services, asker, XBOX)

    stored = await services.db.last_decision("whatsapp", 7)
    assert len(stored.result.answer) <= MAX_ANSWER_CHARS
    assert stored.result.answer.count(SENTENCE.strip()) == 1  # the repeats are gone
    bound = stored.result.trace.get("answer_bound")
    n_before, n_after = map(int, re.match(r"(\d+) chars -> (\d+) chars", bound.detail).groups())
    assert bound.decision == "cut" and n_before == 6000 and n_after <= MAX_ANSWER_CHARS
    assert "39 repeated sentences dropped" in bound.detail
    [text] = reply.messages
    assert len(to_html(text)) == 1 and len(to_whatsapp(text)) == 1  # one message per channel
    assert len(reply.speech.text) <= MAX_SPEECH_CHARS
    assert reply.speech.text.endswith(".")  # cut at a sentence end


def _silent_wav(seconds: float, rate_hz: int = 8000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate_hz)
        w.writeframes(b"\0\0" * int(seconds * rate_hz))
    return out.getvalue()


@needs_tools("espeak-ng", "ffmpeg")
def test_a_spoken_reply_never_lasts_longer_than_the_maximum():
    audio = encode_voice_note(_silent_wav(519.0))  # the 5,999-character answer's length
    assert MAX_VOICE_REPLY_S - 1 <= audio.duration_s <= MAX_VOICE_REPLY_S



async def test_a_telegram_and_a_whatsapp_sender_with_one_id_share_no_rate_limit(
        tmp_path, fake_settings, fake_pipeline):
    """Issue 33: in one process (SQLite: the in-memory limit), the limit ON at one message a
    minute: Telegram's user 42 and WhatsApp's number 42 are two senders, each with its own
    window, as they are across replicas (``storage.ratelimit`` keys ``channel:id``)."""
    settings = Settings.from_env({"BOT_DB_PATH": str(tmp_path / "bot.sqlite3"),
                                  "BOT_RATE_LIMIT_N": "1", "BOT_RATE_LIMIT_WINDOW_S": "60"})
    services = await Services.open(replace(settings, rag=fake_settings), fake_pipeline)
    try:
        assert isinstance(services.state, InProcessState)  # the in-memory limit
        telegram = Asker("telegram", 42, user_id=42, message_id=1)
        whatsapp = Asker("whatsapp", 42, user_id=42, message_key="wamid.1")
        replies = [await reply_to_text(services, asker, "/help")
                   for asker in (telegram, whatsapp, replace(telegram, message_id=2))]
    finally:
        await services.close()
    helped_telegram, helped_whatsapp, limited = [[str(m) for m in r.messages] for r in replies]
    assert helped_telegram[0].startswith("Hello! Ask me a question")
    assert helped_whatsapp[0].startswith("Hello! Ask me a question"), helped_whatsapp
    # the limit is on: Telegram's 42 used its one message of the minute
    assert limited[0].startswith("Too many messages: please wait"), limited


async def test_the_same_question_from_a_telegram_and_a_whatsapp_chat_with_one_id_is_no_repeat(
        services):
    """Issue 33: the in-memory repeat window keys each chat by channel and id, as the
    replicas' one does (``storage.repeats``)."""
    assert isinstance(services.state, InProcessState)  # the in-memory repeat window
    telegram = Asker("telegram", 42, user_id=42, message_id=1)
    whatsapp = Asker("whatsapp", 42, user_id=42, message_key="wamid.1")
    replies = [await answer_text(services, asker, XBOX)
               for asker in (telegram, whatsapp, replace(telegram, message_id=2))]
    answer_telegram, answer_whatsapp, repeat = [[str(m) for m in r.messages] for r in replies]
    assert "Sources" in answer_telegram[0]
    assert "Sources" in answer_whatsapp[0], answer_whatsapp
    assert replies[1].decision_id not in (None, replies[0].decision_id)
    # the window is on: Telegram's 42 asked it a moment ago
    assert repeat == ["You asked this a moment ago: my answer is above."], repeat


async def test_a_reply_carries_its_decisions_status_and_the_language_it_is_written_in(services):
    """Issue 41: a front end labels a reply from the reply itself (no reading back)."""
    asker = Asker("web", 9, user_id=9)
    answered = await reply_to_text(services, asker, "छोटे खीरे में कैलोरी की मात्रा")
    stored = await services.db.last_decision("web", 9)
    assert (answered.status, answered.lang) == (stored.result.status, "hi")
    assert answered.status in (Status.ANSWERED, Status.HEDGED)
    refused = await reply_to_text(services, asker, "Who is the Prime Minister of India?")
    assert refused.status.is_refusal and refused.lang == "en"
    helped = await reply_to_text(services, asker, "/help")
    assert (helped.status, helped.decision_id, helped.lang) == (None, None, "en")
    await lang_reply(services, asker, "gu")
    told = await reply_to_text(services, asker, "/voice")
    assert told.lang == "gu" and told.status is None
    why = await reply_to_text(services, asker, "/why")
    assert why.lang == "en"  # the language of the question it explains
