"""Repeats and replies to the bot on the real PTB Application against the fake Bot API server:
five identical questions in a second get one answer and one pointer; "why?" as a reply to an
answer shows that answer's decision chain (in en/hi/gu/te); a message like "tell me more" or
"और बताओ" in reply to an answer, or while the chat has a conversation context, gets a notice
that an answer cannot be continued (but a short question on its topic is read with it) instead
of a retrieval; a forwarded question is recorded as forwarded."""
# ruff: noqa: F811  (the bot fixtures are imported from tests.test_bot_telegram)

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

import pytest

from bot.chat.followups import reply_kind
from bot.chat.repeats import RepeatFilter
from tests.test_bot_telegram import (  # noqa: F401  (fixtures)
    CHAT,
    PM,
    XBOX,
    bot,
    bot_settings,
    replies,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def sent_to(tg, message_id: int) -> list:
    return [c for c in tg.calls if c.method == "sendMessage"
            and c.params.get("reply_parameters", {}).get("message_id") == message_id]


@pytest.mark.slow  # waits 1 s for further replies
async def test_five_identical_questions_in_a_second_get_one_answer_and_one_pointer(
        bot, tg, caplog):
    caplog.set_level(logging.INFO, logger="bot.chat.questions")
    pushed = [await tg.push_text(CHAT, XBOX if i % 2 else XBOX.lower().rstrip("?"))
              for i in range(5)]
    await tg.wait_for("sendMessage", 2, timeout=30)
    await asyncio.sleep(1.0)  # any further replies would have come by now
    ids = [u["message"]["message_id"] for u in pushed]
    texts = [c.params["text"] for c in tg.calls if c.method == "sendMessage"]
    assert len(texts) == 2, texts
    assert sum("Sources" in text for text in texts) == 1
    assert "You asked this a moment ago: my answer is above." in texts
    assert len(sent_to(tg, ids[0])) == 1  # the first one is the one answered
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("repeat ")]
    assert [line.rsplit("reply=", 1)[1] for line in logged] == ["pointer", "dropped", "dropped",
                                                                 "dropped"]


async def test_the_same_question_after_the_window_is_answered_again(bot, tg, bot_settings):
    services = bot.bot_data["services"]
    services.state = replace(services.state, repeats=RepeatFilter(0.2))
    await tg.push_text(CHAT, XBOX)
    await replies(tg)
    await asyncio.sleep(0.3)
    await tg.push_text(CHAT, XBOX)
    [again] = await replies(tg)
    assert "Sources" in again


@pytest.mark.parametrize(("why", "header"), [
    ("why?", "How I decided the last answer:"), ("Why", "How I decided the last answer:"),
    ("क्यों?", None), ("શા માટે?", None), ("ఎందుకు", None)])
async def test_why_as_a_reply_to_an_answer_shows_that_answers_chain(bot, tg, why, header):
    question = await tg.push_text(CHAT, XBOX)
    await tg.wait_for("sendMessage", timeout=30)
    await tg.push_text(CHAT, PM)  # a later question: "why?" must not explain this one
    await tg.wait_for("sendMessage", timeout=30)
    await tg.push_text(CHAT, why, reply_to=bot_reply_id(tg, question))
    [chain] = await replies(tg)
    assert f"Question: {XBOX}" in chain or XBOX in chain
    assert PM not in chain
    assert "relevance_guard — passed" in chain
    if header:
        assert chain.startswith(header)


def bot_reply_id(tg, update: dict) -> int:
    """The message id of the bot's (first) reply to the message of ``update``."""
    call = next(c for c in tg.calls if c.method == "sendMessage" and c.params.get(
        "reply_parameters", {}).get("message_id") == update["message"]["message_id"])
    return call.result["message_id"]


async def test_why_as_a_reply_to_a_non_answer_says_so(bot, tg):
    help_update = await tg.push_text(CHAT, "/help")
    await tg.wait_for("sendMessage", timeout=30)
    await tg.push_text(CHAT, "why?", reply_to=bot_reply_id(tg, help_update))
    [reply] = await replies(tg)
    assert reply.startswith("That message was not an answer")


@pytest.mark.parametrize(("follow_up", "lang", "expected"), [
    ("tell me more", "en", "I cannot continue an answer"),
    ("और बताओ", "hi", "मैं किसी जवाब को आगे नहीं बढ़ा सकता"),
    ("વધુ કહો", "gu", "હું કોઈ જવાબને આગળ વધારી શકતો નથી"),
    ("మరింత చెప్పండి", "te", "నేను ఒక సమాధానాన్ని కొనసాగించలేను"),
])
async def test_tell_me_more_in_reply_to_an_answer_says_an_answer_cannot_be_continued(
        bot, tg, bot_settings, follow_up, lang, expected):
    question = await tg.push_text(CHAT, XBOX, language_code=lang)
    await tg.wait_for("sendMessage", timeout=30)
    n_decisions = await _n_decisions(bot_settings)
    await tg.push_text(CHAT, follow_up, reply_to=bot_reply_id(tg, question), language_code=lang)
    [reply] = await replies(tg)
    assert reply.startswith(expected) and "/new" in reply
    assert await _n_decisions(bot_settings) == n_decisions  # no retrieval ran


async def test_tell_me_more_typed_after_an_answer_gets_the_notice_and_after_new_is_a_question(
        bot, tg, bot_settings):
    await tg.push_text(CHAT, XBOX)
    await replies(tg)
    n_decisions = await _n_decisions(bot_settings)
    await tg.push_text(CHAT, "tell me more")  # not a reply: the chat's context makes it one
    [notice] = await replies(tg)
    assert notice.startswith("I cannot continue an answer")
    assert await _n_decisions(bot_settings) == n_decisions
    await tg.push_text(CHAT, "/new")
    await replies(tg)
    await tg.push_text(CHAT, "tell me more")  # no context: searched as a question, as before
    [searched] = await replies(tg)
    assert not searched.startswith("I cannot continue an answer")
    assert await _n_decisions(bot_settings) == n_decisions + 1


async def _n_decisions(settings) -> int:
    from storage.db import Database

    async with await Database.open(settings.bot.db_path) as db:
        return await db.count_decisions()


@pytest.mark.parametrize(("text", "kind"), [
    ("why?", "why"), ("But why", "why"), ("क्यों नहीं", "why"), ("કેમ?", "why"),
    ("tell me more", "follow_up"), ("ok thanks", "follow_up"), ("और बताओ", "follow_up"),
    ("why is the sky blue", None), ("capital of India?", None), ("yes bank share price", None),
    ("", None)])
def test_reply_kinds(text, kind):
    assert reply_kind(text) == kind


def test_repeat_filter_keys_on_words_and_forgets_after_the_window():
    repeats = RepeatFilter(window_s=30)
    assert repeats.check(1, 10, "What is X?", now_s=0) is None
    repeat = repeats.check(1, 11, "  what is x ", now_s=5)
    assert (repeat.first_message_id, repeat.age_s, repeat.n_repeat) == (10, 5, 1)
    assert repeats.check(2, 12, "what is x", now_s=5) is None  # another chat
    assert repeats.check(1, 10, "What is X?", now_s=6) is None  # the same message (an edit)
    assert repeats.check(1, 13, "what is x", now_s=40) is None  # window over
    repeats.forget(1, "WHAT IS X")
    assert repeats.check(1, 14, "what is x", now_s=41) is None


def test_repeat_filter_repeats_only_the_chats_last_question_and_forget_chat_clears_it():
    """Issue 44: the same short follow-up after another question is a new question."""
    repeats = RepeatFilter(window_s=30)
    assert repeats.check(1, 10, "and a big one?", now_s=0) is None
    assert repeats.check(1, 11, "How much is a melon?", now_s=1) is None
    assert repeats.check(1, 12, "and a big one?", now_s=2) is None  # a question in between
    assert repeats.check(1, 13, "And a big one", now_s=3).n_repeat == 1
    repeats.forget_chat(1)
    assert repeats.check(1, 14, "and a big one?", now_s=4) is None


# --------------------------------------------------------------------------------- forwards

async def test_forwarded_voice_note_is_recorded_as_forwarded(bot, tg, sarvam, bot_settings):
    from standins.sarvam import Reply as SttReply
    from standins.voice_notes import make_voice_note
    from tests.test_bot_telegram import last_decision

    sarvam.enqueue(SttReply(XBOX))
    file_id = tg.add_file(make_voice_note("how much does an xbox 360 cost", "en"))
    sent_at = 1_764_547_200  # 2025-12-01T00:00:00Z
    await tg.push_update({"message": {
        "message_id": 8801, "date": int(time.time()),
        "chat": {"id": CHAT, "type": "private", "first_name": "Asha"},
        "from": {"id": CHAT, "is_bot": False, "first_name": "Asha"},
        "forward_origin": {"type": "user", "date": sent_at,
                           "sender_user": {"id": 555, "is_bot": False, "first_name": "Ravi"}},
        "voice": {"file_id": file_id, "file_unique_id": "U-fwd", "duration": 3,
                  "mime_type": "audio/ogg"}}})
    [answer] = await replies(tg)
    assert "Sources" in answer
    stored = await last_decision(bot_settings)
    stage = stored.result.trace.get("forwarded")
    assert (stage.decision, stage.detail) == ("user", "from user 555 at 2025-12-01T00:00:00Z")
    await tg.push_text(CHAT, "/why")
    [why] = await replies(tg)
    assert "forwarded — user: from user 555 at 2025-12-01T00:00:00Z" in why


async def test_forwarded_channel_post_typed_is_recorded_and_others_are_not(bot, tg,
                                                                          bot_settings):
    from tests.test_bot_telegram import last_decision

    await tg.push_update({"message": {
        "message_id": 8802, "date": int(time.time()), "text": XBOX,
        "chat": {"id": CHAT, "type": "private", "first_name": "Asha"},
        "from": {"id": CHAT, "is_bot": False, "first_name": "Asha"},
        "forward_origin": {"type": "channel", "date": 1_764_547_200, "message_id": 3,
                           "chat": {"id": -100777, "type": "channel", "title": "News"}}}})
    await replies(tg)
    stored = await last_decision(bot_settings)
    assert stored.result.trace.stages[0].name == "forwarded"
    assert stored.result.trace.get("forwarded").detail.startswith("from channel -100777 at ")
    await tg.push_text(CHAT, PM)
    await replies(tg)
    assert (await last_decision(bot_settings)).result.trace.get("forwarded") is None
