"""The life of a claimed message as the chat layer writes it once (``bot.chat.lifecycle``), on a
real SQLite inbox and the fake pipeline's services, through a minimal front end: what each
outcome stores, what reaches the user, and that a replica's database error leaves the message
unfinished for the dispatcher instead of answering it."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import nullcontext
from typing import Any

import pytest

from bot.chat.inbox import Claim, channel_inbox
from bot.chat.lifecycle import Answering, MessageLifecycle
from bot.chat.messages import t
from bot.chat.render import Text
from bot.chat.services import Services
from bot.chat.types import Asker, Reply
from bot.settings import BotSettings, Settings, TelegramSettings
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings

CHANNEL = "probe"
CHAT = 4242


class KeptOutbox:
    """An ``Outbox`` that keeps what it is given, by chat, after the claim's ``on_wire``."""

    def __init__(self) -> None:
        self.sent: dict[int, list[str]] = {}

    async def send_text(self, asker, texts, on_wire) -> list[int]:
        await on_wire()
        self.sent.setdefault(asker.chat_id, []).extend(str(text) for text in texts)
        return []

    async def send_voice(self, asker, audio, on_wire) -> str:
        raise AssertionError("no voice in these tests")

    def busy(self, asker, activity) -> nullcontext:
        return nullcontext()


class Probe(MessageLifecycle):
    """A front end whose payload says how old it is and whether answering it fails."""

    def __init__(self, services: Services) -> None:
        super().__init__(services, channel_inbox(services, CHANNEL), KeptOutbox())
        self.finished_keys: list[str] = []
        self.asked: list[str] = []
        self.started = asyncio.Event()

    def asker_of(self, payload: dict[str, Any], claim: Claim) -> Asker:
        return Asker(CHANNEL, payload["chat"], user_id=payload["chat"], message_key=claim.key,
                     language_code="en")

    def age_s(self, payload: dict[str, Any]) -> float | None:
        return payload.get("age_s")

    async def reply_to(self, asker: Asker, payload: dict[str, Any]) -> Reply:
        self.asked.append(asker.message_key)
        if payload.get("fail") == "bug":
            raise RuntimeError("a bug in the answer")
        if payload.get("fail") == "database":
            raise sqlite3.OperationalError("database is locked")
        if payload.get("fail") == "cancelled":  # as psycopg does when a cancel goes unanswered
            self.started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                raise sqlite3.OperationalError("the connection is closed") from None
        return Reply([Text.plain(f"answer to {payload['text']}")])

    def finished(self, message: Answering) -> None:
        self.finished_keys.append(message.claim.key)


@pytest.fixture
async def probe(tmp_path, fake_settings, fake_pipeline) -> AsyncIterator[Probe]:
    settings = Settings(rag=fake_settings, sarvam=SarvamSettings(),
                        openrouter=OpenRouterSettings(), telegram=TelegramSettings(),
                        bot=BotSettings(db_path=tmp_path / "bot.sqlite3", rate_limit_n=0,
                                        inbox_max_age_s=600.0))
    services = await Services.open(settings, fake_pipeline)
    try:
        front = Probe(services)
        assert await front.replay() == 0
        yield front
        await front.aclose()
    finally:
        await services.close()


async def claimed(front: Probe, key: str, **payload: Any) -> tuple[dict[str, Any], Claim]:
    payload = {"chat": CHAT, "type": "text", "text": key, **payload}
    claim = await front.inbox.claim(key, CHAT, json.dumps(payload))
    assert claim is not None
    return payload, claim


async def row(front: Probe, key: str):
    return await front.inbox.store.get(CHANNEL, key)


async def test_an_answer_is_delivered_and_finished_in_the_chats_order(probe, caplog):
    caplog.set_level(logging.INFO)
    for key in ("m1", "m2", "m3"):
        probe.spawn(*await claimed(probe, key))
    await probe.drain(10)
    assert probe.outbox.sent[CHAT] == ["answer to m1", "answer to m2", "answer to m3"]
    for key in ("m1", "m2", "m3"):
        item = await row(probe, key)
        assert item.status == "done" and item.outcome.startswith("replied ")
    assert probe.finished_keys == ["m1", "m2", "m3"]
    assert "probe_reply channel=probe chat_id=4242 message_id=m2 type=text" in caplog.text


async def test_an_error_in_reply_to_gives_the_error_reply_and_outcome_error(probe, caplog):
    await probe.handle(*await claimed(probe, "bug", fail="bug"))
    assert probe.outbox.sent[CHAT] == [t("error", "en")]
    item = await row(probe, "bug")
    assert (item.status, item.outcome) == ("done", "error")
    assert "probe_error chat_id=4242 message_id=bug" in caplog.text
    assert "RuntimeError: a bug in the answer" in caplog.text
    assert probe.finished_keys == ["bug"]


async def test_a_database_error_in_one_process_is_not_deferred(probe):
    payload, claim = await claimed(probe, "db1", fail="database")
    await probe.handle(payload, claim)
    assert claim.deferred is None
    assert (await row(probe, "db1")).outcome == "error"
    assert probe.outbox.sent[CHAT] == [t("error", "en")]


async def test_a_database_error_under_replicas_defers_without_finishing(probe, caplog):
    payload, _ = await claimed(probe, "db2", fail="database")
    item = await row(probe, "db2")
    claim = Claim(probe.inbox, "db2", holder="replica-a")  # as the dispatcher hands it out
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        await probe.handle_stored(item, claim)
    assert isinstance(claim.deferred, sqlite3.OperationalError)
    assert probe.outbox.sent == {}  # nothing sent: the dispatcher answers it again
    assert (await row(probe, "db2")).status == "pending"
    assert probe.finished_keys == []
    assert "answer_deferred channel=probe chat_id=4242 message_id=db2 " \
           "kind=OperationalError" in caplog.text


async def test_a_stale_message_gets_the_apology_instead_of_an_answer(probe):
    await probe.handle(*await claimed(probe, "old", age_s=3600.0))
    assert probe.asked == []
    assert probe.outbox.sent[CHAT] == [t("stale_question", "en")]
    assert (await row(probe, "old")).outcome == "stale_apology age_s=3600"


async def test_replay_answers_what_a_crash_left_pending(probe):
    await claimed(probe, "left")  # claimed, never handled: the process died
    assert await probe.replay() == 1
    await probe.drain(10)
    assert probe.outbox.sent[CHAT] == ["answer to left"]
    assert (await row(probe, "left")).status == "done"


async def test_an_answer_cancelled_at_shutdown_stays_unfinished_even_if_the_driver_hid_it(probe):
    """``aclose`` cancels answers still running after its wait; a driver that turns that
    cancellation into its own error must not make it an "error" outcome with an error reply."""
    task = probe.spawn(*await claimed(probe, "slow", fail="cancelled"))
    await asyncio.wait_for(probe.started.wait(), 10)
    task.cancel()
    await asyncio.wait({task}, timeout=10)
    assert task.cancelled()
    assert probe.outbox.sent == {}
    assert (await row(probe, "slow")).status == "pending"  # answered at the next start
    assert probe.finished_keys == []
