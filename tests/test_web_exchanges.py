"""The web page's conversations in the database (``storage.web_exchanges``, migration
``m010_web_conversations``), on SQLite and (slow) PostgreSQL, and the decision log's record of a
cut question."""

from __future__ import annotations

import json

import pytest

from rag.types import QuestionCut, Result, Status
from storage.db import Database
from storage.web_exchanges import WebExchanges


class Clock:
    """Unix seconds that a test moves on."""

    def __init__(self, now_s: float = 1_700_000_000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
async def db(db_target):
    async with await Database.open(db_target) as database:
        yield database


async def test_a_message_its_reply_voice_and_recording_round_trip(db):
    clock = Clock()
    store = WebExchanges(db, clock)
    recording = bytes(range(256)) * 40  # every byte value: a binary column, not text
    assert await store.add(7, "7:aa", "छोटे खीरे में कैलोरी", is_voice=True, upload=recording)
    assert not await store.add(7, "7:aa", "again")  # a form sent twice is stored once
    assert await store.upload("7:aa") == recording
    [pending] = await store.of_chat(7)
    assert (pending.key, pending.question, pending.is_voice, pending.view, pending.is_done) == (
        "7:aa", "छोटे खीरे में कैलोरी", True, None, False)
    clock.now_s += 5
    view = json.dumps({"kind": "confident", "lang": "hi"}, ensure_ascii=False)
    assert await store.set_voice("7:aa", b"OggS" + recording, 2.5)
    assert await store.set_view("7:aa", view, is_done=True)
    done = await store.get("7:aa")
    assert (done.view, done.is_done, done.voice_s, done.updated_at_s) == (
        view, True, 2.5, clock.now_s)
    assert done.created_at_s == clock.now_s - 5
    assert await store.upload("7:aa") is None  # answered: the recording is gone
    assert await store.voice("7:aa") == b"OggS" + recording
    assert await store.voice("7:bb") is None and await store.get("7:bb") is None
    assert not await store.set_view("7:bb", "{}", is_done=True)
    assert await store.knows(7) and not await store.knows(8)


async def test_a_chat_keeps_its_newest_history_and_other_chats_are_untouched(db):
    store = WebExchanges(db, Clock())
    await store.add(2, "2:x", "other chat", history=3)
    for n in range(5):
        await store.add(1, f"1:{n}", f"question {n}", history=3)
    assert [e.key for e in await store.of_chat(1)] == ["1:2", "1:3", "1:4"]
    assert [e.key for e in await store.of_chat(1, limit=2)] == ["1:3", "1:4"]
    assert [e.key for e in await store.of_chat(2)] == ["2:x"]
    with pytest.raises(ValueError, match="history"):
        await store.add(1, "1:9", "q", history=0)


async def test_exchanges_unchanged_past_the_keep_window_expire(db):
    clock = Clock()
    store = WebExchanges(db, clock)
    await store.add(1, "1:old", "old")
    await store.add(1, "1:answered", "asked long ago, answered later")
    clock.now_s += 100
    await store.add(1, "1:new", "new")
    await store.set_view("1:answered", "{}", is_done=True)  # a change keeps it
    assert await store.expire(before_s=clock.now_s - 50) == 1
    assert [e.key for e in await store.of_chat(1)] == ["1:answered", "1:new"]
    assert await store.expire(before_s=clock.now_s - 50) == 0


async def test_a_cut_questions_decision_keeps_its_cut(db):
    cut = QuestionCut(n_chars=5000, n_kept=998, max_chars=1000)
    decision_id = await db.record_decision("web", 1, None, 1, "text", Result(
        Status.REFUSED_BAD_INPUT, "what " * 199 + "what", "en", cut=cut))
    whole = await db.record_decision("web", 1, None, 1, "text", Result(Status.ERROR, "q", "en"))
    assert (await db.decision(decision_id)).result.cut == cut
    assert (await db.decision(whole)).result.cut is None
    assert await db.decision(whole + 1) is None
