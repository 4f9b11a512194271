"""The WhatsApp front end end to end on 127.0.0.1: signed webhook POSTs (real HTTP, httpx) to the
real aiohttp server, answers from the fake pipeline (tests/fakes.py), replies and media through
the Graph API stand-in, voice notes of real speech (espeak-ng, OGG/Opus) through the Sarvam
stand-in. The child-process tests (``python -m bot --whatsapp``, the demo and the benchmark)
answer from the shared-sample index (slow).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from bot.chat.ratelimit import RateLimiter
from bot.chat.render import Span, Text
from bot.chat.repeats import RepeatFilter
from bot.chat.services import Services
from bot.settings import Settings
from bot.whatsapp.app import serving, whatsapp_policy
from bot.whatsapp.markup import split_text, to_whatsapp
from bot.whatsapp.settings import WhatsAppSettings
from standins.sarvam import Reply
from standins.voice_notes import make_voice_note
from standins.whatsapp import (
    FakeGraph,
    audio_message,
    encode,
    other_message,
    sign,
    status_update,
    text_message,
)
from storage.db import Database
from tests.conftest import ROOT, needs_tools
from tests.fakes import chat_settings

pytestmark = needs_tools("espeak-ng", "ffmpeg")

SECRET = "app-secret-for-tests"
VERIFY = "verify-me"
WA_ID = "919800000001"
XBOX = "How much does an Xbox 360 cost?"
CUCUMBER_HI = "छोटे खीरे में कैलोरी की मात्रा"
DEVANAGARI = re.compile(r"[\u0900-\u097F]")
CITATION = re.compile(r"1\. ```(en|hi)-\d+-\d+``` · ")


@pytest.fixture
async def graph() -> AsyncIterator[FakeGraph]:
    async with FakeGraph() as fake:
        yield fake


@pytest.fixture
def bot_settings(tmp_path, fake_settings, sarvam) -> Settings:
    return chat_settings(fake_settings, tmp_path / "bot.sqlite3", sarvam)


@pytest.fixture
def wa(graph) -> WhatsAppSettings:
    return WhatsAppSettings(token=graph.token, phone_number_id=graph.phone_number_id,
                            app_secret=SECRET, verify_token=VERIFY, api_base=graph.url,
                            api_version=graph.version, listen="127.0.0.1", port=0,
                            backoff_base_s=0.05, max_attempts=3)


@pytest.fixture
async def front(bot_settings, fake_pipeline, wa):
    services = await Services.open(bot_settings, fake_pipeline)
    try:
        async with serving(services, wa) as (front_end, url):
            async with httpx.AsyncClient(base_url=url) as http:
                front_end.http = http
                yield front_end
    finally:
        await services.close()


async def post(front, payload: dict, *, secret: str = SECRET) -> httpx.Response:
    """POST ``payload`` as Meta would: compact JSON, signed with ``secret``; then wait for the
    background handling to finish."""
    body = encode(payload)
    response = await front.http.post(
        front.wa.webhook_path, content=body,
        headers={"Content-Type": "application/json", "X-Hub-Signature-256": sign(body, secret)})
    await front.drain()
    return response


def bodies(graph: FakeGraph) -> list[str]:
    """The text messages delivered, in order."""
    return [s.body["text"]["body"] for s in graph.delivered("text")]



async def outcome(front, wamid: str) -> str | None:
    """The stored outcome of message ``wamid``, without its decision id."""
    item = await front.inbox.store.get("whatsapp", wamid)
    return None if item is None else re.sub(r" decision_id=\S+", "", item.outcome)

async def decisions(db_path) -> int:
    async with await Database.open(db_path) as db:
        return await db.count_decisions()


# ------------------------------------------------------------------------ webhook


async def test_get_verification_echoes_the_challenge_only_with_the_verify_token(front):
    ok = await front.http.get("/webhook", params={
        "hub.mode": "subscribe", "hub.verify_token": VERIFY, "hub.challenge": "1158201444"})
    assert ok.status_code == 200 and ok.text == "1158201444"
    bad = await front.http.get("/webhook", params={
        "hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1158201444"})
    assert bad.status_code == 403 and "1158201444" not in bad.text


async def test_bad_signature_is_refused_with_403_and_nothing_recorded(front, graph,
                                                                      bot_settings):
    payload = text_message(WA_ID, XBOX, message_id="wamid.forged")
    response = await post(front, payload, secret="not-the-app-secret")
    assert response.status_code == 403
    body = encode(payload)  # a signature of other bytes (one changed character) fails too
    tampered = await front.http.post("/webhook", content=body.replace(b"360", b"361"),
                                     headers={"X-Hub-Signature-256": sign(body, SECRET)})
    assert tampered.status_code == 403
    unsigned = await front.http.post("/webhook", content=body)
    assert unsigned.status_code == 403
    await front.drain()
    assert graph.sent == [] and await decisions(bot_settings.bot.db_path) == 0
    assert await front.inbox.store.get("whatsapp", "wamid.forged") is None


async def post_body(front, body: bytes) -> httpx.Response:
    """POST raw ``body`` with its valid signature (as only Meta, or whoever holds the app
    secret, can); then wait for the background handling to finish."""
    response = await front.http.post(front.wa.webhook_path, content=body, headers={
        "Content-Type": "application/json", "X-Hub-Signature-256": sign(body, SECRET)})
    await front.drain()
    return response


async def test_signed_but_malformed_payloads_get_no_500_and_good_messages_beside_them_answered(
        front, graph, caplog):
    """Meta retries a POST answered 500 for days, so one odd message must neither 500 nor stop
    the other messages of its POST from being claimed."""
    for body in (b"[" * 100_000 + b"]" * 100_000,  # nesting past the recursion limit
                 b'{"entry":[{"changes":[{"field":"messages","value":"x"}]}]}',
                 b'{"entry":[{"changes":[{"field":"messages","value":null}]}]}',
                 b'{"entry":[{"changes":[{"field":"messages","value":{"metadata":"x"}}]}]}'):
        response = await post_body(front, body)
        assert response.status_code in (200, 400), (body[:80], response.status_code)
    payload = text_message(WA_ID, "help", message_id="wamid.good")
    value = payload["entry"][0]["changes"][0]["value"]
    value["messages"][:0] = [
        "junk", {"id": {"a": 1}, "from": WA_ID, "type": "text", "text": {"body": "help"}},
        {"id": "wamid.sup", "from": "²³", "type": "text", "text": {"body": "help"}},
        {"id": "wamid.long", "from": "9" * 40, "type": "text", "text": {"body": "help"}},
        {"id": "wamid.arabic", "from": "٩١٩٨٠٠", "type": "text", "text": {"body": "help"}}]
    value["statuses"] = ["x", {"id": "wamid.out.1", "status": "failed", "errors": ["x"]}]
    with caplog.at_level(logging.WARNING, logger="bot.whatsapp.app"):
        response = await post(front, payload)
    assert response.status_code == 200
    [reply] = graph.delivered()  # only the well-formed message, to the sender's own number
    assert reply.body["to"] == WA_ID and "Hello" in reply.body["text"]["body"]
    assert await outcome(front, "wamid.good") == "replied n_messages=1"
    assert caplog.text.count("webhook_skipped") >= 5
    # a lone surrogate (valid JSON, not storable as UTF-8) is read as U+FFFD and answered
    message = f'{XBOX} \\ud83d'.encode()
    body = encode(text_message(WA_ID, "QUESTION", message_id="wamid.surrogate")).replace(
        b"QUESTION", message)
    assert (await post_body(front, body)).status_code == 200
    assert "*Sources*" in bodies(graph)[-1], bodies(graph)[-1]
    # a numeric 'from' is the same sender as its string
    payload = text_message(WA_ID, "help", message_id="wamid.int")
    payload["entry"][0]["changes"][0]["value"]["messages"][0]["from"] = int(WA_ID)
    await post(front, payload)
    assert graph.delivered()[-1].body["to"] == WA_ID


async def test_text_message_without_a_string_body_is_an_empty_message(front, graph):
    # each one answered, not "you asked this"
    front.services.state = replace(front.services.state, repeats=RepeatFilter(0.0))
    for text in (None, {"body": None}, "How much does an Xbox 360 cost?", {"body": ["x"]}):
        payload = text_message(WA_ID, "")
        payload["entry"][0]["changes"][0]["value"]["messages"][0]["text"] = text
        await post(front, payload)
    assert bodies(graph) == ["Your message is empty. Please ask a question."] * 4, bodies(graph)


async def test_media_id_that_is_not_an_id_never_takes_the_token_elsewhere(front, graph):
    async with FakeGraph() as elsewhere:
        for media_id in (f"{elsewhere.url}/{elsewhere.version}/M1", "../v21.0/x", ""):
            await post(front, audio_message(WA_ID, media_id))
        assert elsewhere.n_requests == 0
    assert graph.media_lookups == [] and graph.downloads == []
    assert all("could not download" in b for b in bodies(graph)), bodies(graph)


async def test_media_lookup_without_a_url_gets_could_not_download(front, graph):
    graph.fail_next(200, code=0, message="not a media object")  # 200, but no url in it
    await post(front, audio_message(WA_ID, "MEDIA-odd", message_id="wamid.odd"))
    assert "could not download" in bodies(graph)[0], bodies(graph)
    assert await outcome(front, "wamid.odd") == "replied n_messages=1"


async def test_a_reaction_to_an_answer_is_logged_not_answered(front, graph, caplog):
    with caplog.at_level(logging.INFO, logger="bot.whatsapp.app"):
        await post(front, other_message(WA_ID, "reaction", {"message_id": "wamid.out.1",
                                                            "emoji": "👍"},
                                        message_id="wamid.thumb"))
    assert graph.sent == []
    assert await outcome(front, "wamid.thumb") == "dropped"
    assert "reaction frontend=whatsapp chat_id=919800000001" in caplog.text


async def test_verification_log_line_cannot_be_forged_through_the_query(front, caplog):
    with caplog.at_level(logging.WARNING, logger="bot.whatsapp.app"):
        response = await front.http.get("/webhook", params={
            "hub.mode": "x\n2026-12-01 INFO bot.whatsapp.app webhook_verified"})
    assert response.status_code == 403
    [record] = [r for r in caplog.records if "webhook_verify_refused" in r.getMessage()]
    assert "\n" not in record.getMessage()


# ------------------------------------------------------------------------ answers


async def test_text_question_is_answered_with_citations_in_whatsapp_formatting(
        front, graph, bot_settings):
    response = await post(front, text_message(WA_ID, XBOX, message_id="wamid.q1"))
    assert response.status_code == 200
    [answer] = bodies(graph)
    assert "*Sources*" in answer and CITATION.search(answer), answer
    assert "<" not in answer and "&amp;" not in answer
    assert graph.delivered()[0].body["to"] == WA_ID
    row = await front.inbox.store.get("whatsapp", "wamid.q1")
    assert row.status == "done" and row.chat_id == int(WA_ID)
    assert row.decision_id is not None and await outcome(front, "wamid.q1") == \
        "replied n_messages=1"
    async with await Database.open(bot_settings.bot.db_path) as db:
        stored = await db.last_decision("whatsapp", int(WA_ID))
    assert stored.id == row.decision_id and stored.source == "text"
    assert stored.reply_ms is not None


async def test_hindi_voice_note_answered_in_devanagari_then_why_shows_the_chain(
        front, graph, sarvam, bot_settings):
    graph.add_media("MEDIA-hi-1", make_voice_note(CUCUMBER_HI, "hi"))
    sarvam.enqueue(Reply(transcript=CUCUMBER_HI, language_code="hi-IN"))
    response = await post(front, audio_message(WA_ID, "MEDIA-hi-1", message_id="wamid.v1"))
    assert response.status_code == 200
    [answer] = bodies(graph)
    assert answer.startswith(f"_आपने कहा:_ {CUCUMBER_HI}"), answer
    assert "*स्रोत*" in answer and CITATION.search(answer), answer
    assert len(DEVANAGARI.findall(answer)) > 40
    assert graph.media_lookups == ["MEDIA-hi-1"] and graph.downloads == ["MEDIA-hi-1"]
    async with await Database.open(bot_settings.bot.db_path) as db:
        stored = await db.last_decision("whatsapp", int(WA_ID))
    assert stored.source == "voice" and stored.transcript == CUCUMBER_HI
    # a voice note back (voice auto): Sarvam's speech as OGG/Opus, uploaded, sent after the text
    text_sent, [voice_sent] = graph.delivered("text")[0], graph.delivered("audio")
    assert voice_sent.at_s > text_sent.at_s and voice_sent.body["to"] == WA_ID
    ogg = graph.media_bytes(voice_sent.body["audio"]["id"])
    assert ogg[:4] == b"OggS" and b"OpusHead" in ogg[:100]
    assert await outcome(front, "wamid.v1") == "replied n_messages=1 voice=ok"

    await post(front, text_message(WA_ID, "why"))
    why = bodies(graph)[1]
    assert "```text_to_speech``` — ok: hi-IN" in why and "```send_voice``` — ok: media up-" \
        in why, why
    for stage in ("download", "transcode", "speech_to_text", "search"):
        assert f"```{stage}```" in why, why
    assert DEVANAGARI.search(why) and "<" not in why


async def test_redelivered_message_is_answered_once(front, graph, bot_settings):
    payload = text_message(WA_ID, XBOX, message_id="wamid.twice")
    first, second = await post(front, payload), await post(front, payload)
    assert first.status_code == second.status_code == 200
    assert len(graph.delivered()) == 1 and await decisions(bot_settings.bot.db_path) == 1


async def test_other_types_get_the_notice_and_commands_work_as_plain_words(front, graph):
    await post(front, other_message(WA_ID, "image", {"id": "IMG1", "mime_type": "image/jpeg"}))
    await post(front, text_message(WA_ID, "lang hi"))
    await post(front, text_message(WA_ID, "/help"))
    await post(front, text_message(WA_ID, "voice on"))
    await post(front, text_message(WA_ID, XBOX))  # typed, with voice on: text, then a voice note
    notice, lang, help_text, voice_on, answer = bodies(graph)
    assert "I understand text questions and voice notes" in notice
    assert DEVANAGARI.search(lang) and DEVANAGARI.search(help_text)
    assert DEVANAGARI.search(voice_on) and "*स्रोत*" in answer  # 'lang hi' holds
    assert len(graph.delivered("audio")) == 1


async def test_429_is_honoured_then_the_reply_goes_out(front, graph, caplog):
    graph.fail_next(429, retry_after_s=0.3)
    with caplog.at_level(logging.INFO, logger="bot.whatsapp.graph"):
        await post(front, text_message(WA_ID, XBOX, message_id="wamid.busy"))
    refused, delivered = graph.sent
    assert refused.status == 429 and delivered.status == 200
    assert delivered.at_s - refused.at_s >= 0.3  # the server's Retry-After, not the 0.05 s base
    assert "kind=rate_limited" in caplog.text and "wait_s=0.30" in caplog.text
    assert await outcome(front, "wamid.busy") == "replied n_messages=1"


async def test_closed_window_and_bad_token_are_logged_not_retried(front, graph, caplog):
    graph.close_window(WA_ID)
    with caplog.at_level(logging.WARNING, logger="bot.whatsapp.app"):
        await post(front, text_message(WA_ID, XBOX, message_id="wamid.late"))
    assert [s.status for s in graph.sent] == [400]
    assert "kind=window_closed" in caplog.text
    assert await outcome(front, "wamid.late") == "send_failed kind=window_closed"
    graph.sent.clear()
    graph._closed.clear()
    graph.fail_next(401, times=5)
    await post(front, text_message(WA_ID, "help", message_id="wamid.token"))
    assert [s.status for s in graph.sent] == [401]
    assert await outcome(front, "wamid.token") == "send_failed kind=unauthorized"


async def test_5xx_retried_up_to_max_attempts(front, graph):
    graph.fail_next(503, times=5)
    await post(front, text_message(WA_ID, "help", message_id="wamid.down"))
    assert [s.status for s in graph.sent] == [503, 503, 503]
    assert await outcome(front, "wamid.down") == "send_failed kind=server_error"


async def test_expired_media_url_is_looked_up_again_and_oversize_audio_refused(
        front, graph, sarvam, wa, bot_settings):
    graph.add_media("MEDIA-x", make_voice_note(CUCUMBER_HI, "hi"))
    sarvam.enqueue(Reply(transcript=CUCUMBER_HI, language_code="hi-IN"))
    graph.expire_media("MEDIA-x")  # the first URL expired: a fresh lookup, then the answer
    await post(front, audio_message(WA_ID, "MEDIA-x"))
    assert graph.media_lookups == ["MEDIA-x", "MEDIA-x"]
    assert graph.downloads == ["MEDIA-x", "MEDIA-x"]
    [answer] = bodies(graph)
    assert answer.startswith("_आपने कहा:_") and CITATION.search(answer), answer

    graph.expire_media("MEDIA-x", n_downloads=2)  # expired again: says so, no third lookup
    await post(front, audio_message(WA_ID, "MEDIA-x"))
    assert graph.media_lookups.count("MEDIA-x") == 4
    # before speech-to-text nothing tells the language: English (no interface language here)
    assert "could not download" in bodies(graph)[1], bodies(graph)[1]

    front.wa = replace(wa, max_media_mb=0.001)  # 1,048 bytes
    graph.add_media("MEDIA-big", make_voice_note(CUCUMBER_HI, "hi"))
    await post(front, audio_message(WA_ID, "MEDIA-big"))
    assert graph.downloads.count("MEDIA-big") == 0  # refused by the lookup's file_size
    assert "0.001 MB" in bodies(graph)[2], bodies(graph)[2]
    async with await Database.open(bot_settings.bot.db_path) as db:
        stored = await db.last_decision("whatsapp", int(WA_ID))
    assert stored.result.trace.get("voice").decision == "voice_too_big"


async def test_message_claimed_before_a_crash_is_answered_at_the_next_start(front, graph):
    [[change]] = [e["changes"] for e in text_message(WA_ID, XBOX, message_id="wamid.crash")
                  ["entry"]]
    [message] = change["value"]["messages"]
    # stored before the 200, then the process died
    assert await front.inbox.claim("wamid.crash", int(WA_ID), json.dumps(message))
    async with serving(front.services, front.wa) as (restarted, _url):
        await restarted.drain()
    [answer] = bodies(graph)
    assert "*Sources*" in answer
    assert await outcome(front, "wamid.crash") == "replied n_messages=1"
    await post(front, text_message(WA_ID, XBOX, message_id="wamid.crash"))  # Meta retries
    assert len(graph.delivered()) == 1


async def test_a_question_delivered_late_gets_an_apology_not_an_answer(front, graph,
                                                                       bot_settings):
    sent_at = time.time() - bot_settings.bot.inbox_max_age_s - 60
    await post(front, text_message(WA_ID, XBOX, message_id="wamid.old", sent_at=sent_at))
    [apology] = bodies(graph)
    assert "too late" in apology and await decisions(bot_settings.bot.db_path) == 0
    assert (await outcome(front, "wamid.old")).startswith("stale_apology age_s=")


async def test_a_late_question_from_a_stranger_gets_no_apology(front, graph, wa, bot_settings):
    """Issue 33: the allow-list comes before the apology, as before any answer."""
    front.wa = replace(wa, allowed_numbers=("14155550100",))
    front.services.channels["whatsapp"] = whatsapp_policy(front.wa)
    sent_at = time.time() - bot_settings.bot.inbox_max_age_s - 60
    await post(front, text_message(WA_ID, XBOX, message_id="wamid.old", sent_at=sent_at))
    assert graph.delivered() == []
    assert (await outcome(front, "wamid.old")).startswith("stale_not_allowed age_s=")


async def test_allow_list_by_number(front, graph, wa):
    front.wa = replace(wa, allowed_numbers=("14155550100",))
    front.services.channels["whatsapp"] = whatsapp_policy(front.wa)
    await post(front, text_message(WA_ID, XBOX))
    await post(front, text_message("14155550100", "help"))
    refused, allowed = graph.delivered()
    assert refused.body["to"] == WA_ID and "private" in refused.body["text"]["body"]
    assert allowed.body["to"] == "14155550100" and "Hello" in allowed.body["text"]["body"]


async def test_a_stranger_sending_50_messages_in_a_minute_gets_at_most_the_limit_of_replies(
        front, graph, wa, bot_settings):
    front.services.state = replace(front.services.state, limiter=RateLimiter(5, 60.0))
    front.wa = replace(wa, allowed_numbers=("14155550100",))
    front.services.channels["whatsapp"] = whatsapp_policy(front.wa)
    for n in range(50):
        await post(front, text_message(WA_ID, f"{XBOX} {n}", message_id=f"wamid.s{n}"))
    await front.drain()
    assert [d.body["to"] for d in graph.delivered()] == [WA_ID] * 5
    assert all("private" in body for body in bodies(graph))
    assert await decisions(bot_settings.bot.db_path) == 0
    assert [await outcome(front, f"wamid.s{n}") for n in (0, 5, 49)] == [
        "replied n_messages=1", "dropped", "dropped"]


async def test_failed_delivery_status_is_logged_and_nothing_answered(front, graph, caplog):
    with caplog.at_level(logging.WARNING, logger="bot.whatsapp.app"):
        response = await post(front, status_update(WA_ID, "wamid.out.7"))
    assert response.status_code == 200 and graph.sent == []
    assert "whatsapp_delivery_failed chat_id=919800000001 message_id=wamid.out.7 code=131047" \
        in caplog.text


async def test_graph_timeouts_are_retried_then_given_up(front, graph, wa):
    front.graph._http.timeout = httpx.Timeout(0.2)
    graph.delay_s = 0.5
    await post(front, text_message(WA_ID, "help", message_id="wamid.slow"))
    assert await outcome(front, "wamid.slow") == "send_failed kind=server_error"
    assert graph.n_requests == wa.max_attempts  # each attempt timed out at 0.2 s


async def test_rate_limit_as_on_telegram(front, graph):
    front.services.state = replace(front.services.state, limiter=RateLimiter(1, 60.0))
    await post(front, text_message(WA_ID, XBOX))
    await post(front, text_message(WA_ID, "help"))
    await post(front, text_message(WA_ID, "help"))
    answer, wait = bodies(graph)  # the third is dropped (logged)
    assert "*Sources*" in answer and "wait" in wait.lower(), wait


async def test_a_bug_while_answering_gets_an_apology_and_is_stored(front, graph, monkeypatch,
                                                                   caplog):
    async def broken(*_args):
        raise RuntimeError("a bug")

    monkeypatch.setattr("bot.whatsapp.app.reply_to_text", broken)
    await post(front, text_message(WA_ID, XBOX, message_id="wamid.bug"))
    [apology] = bodies(graph)
    assert "Something went wrong on my side" in apology
    assert await outcome(front, "wamid.bug") == "error"
    assert "whatsapp_error chat_id=919800000001 message_id=wamid.bug" in caplog.text


# ------------------------------------------------------------------------ pure parts


def test_to_whatsapp_and_split_text():
    text = Text((Span("Sources", "bold"), Span("\n1. "), Span("en-1-2", "code"), Span(" · "),
                 Span("a <b> & c", "italic")))
    assert to_whatsapp(text) == ["*Sources*\n1. ```en-1-2``` · _a <b> & c_"]
    long = "\n\n".join(["word " * 300] * 4)  # 4 paragraphs of 1,500 characters
    pieces = split_text(long)
    assert all(len(p) <= 4096 for p in pieces) and len(pieces) == 2
    assert "".join(pieces).replace(" ", "").replace("\n", "") == \
        long.replace(" ", "").replace("\n", "")
    assert split_text("x" * 5000) == ["x" * 4096, "x" * 904]


def test_bench_whatsapp_runs_and_reports_both_phases(sample_index_dir, tmp_path):
    env = {**os.environ, "VOICE_RAG_INDEX_DIR": str(sample_index_dir)}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_whatsapp.py"), "--n",
                           "4"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "4 typed questions, one at a time: webhook 200 after" in proc.stdout
    assert "front end adds" in proc.stdout and "4 at once: webhook 200 after" in proc.stdout


def test_python_m_bot_whatsapp_without_its_settings_exits_2_with_one_line(sample_index_dir,
                                                                         tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHATSAPP_")}
    env |= {"VOICE_RAG_INDEX_DIR": str(sample_index_dir),
            "BOT_DB_PATH": str(tmp_path / "bot.sqlite3"), "WHATSAPP_TOKEN": "EAAG-x"}
    proc = subprocess.run([sys.executable, "-m", "bot", "--whatsapp"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "error: WHATSAPP_PHONE_NUMBER_ID is not set" in proc.stderr, proc.stderr


def test_settings_from_env_reads_port_and_numbers():
    wa = WhatsAppSettings.from_env({"PORT": "5123", "WHATSAPP_ALLOWED_NUMBERS": "+91 98000 00001,"
                                    "14155550100", "WHATSAPP_TOKEN": "t"})
    assert wa.port == 5123 and wa.allowed_numbers == ("919800000001", "14155550100")
    assert wa.missing() is not None and "PHONE_NUMBER_ID" in wa.missing()
    with pytest.raises(ValueError, match="WHATSAPP_ALLOWED_NUMBERS"):
        WhatsAppSettings.from_env({"WHATSAPP_ALLOWED_NUMBERS": "asha"})


def test_dev_whatsapp_demo_answers_a_hindi_voice_note_with_citation_then_why(sample_index_dir,
                                                                             tmp_path):
    """The acceptance demo: the real ``python -m bot --whatsapp`` child process."""
    env = {**os.environ, "VOICE_RAG_INDEX_DIR": str(sample_index_dir),
           "BOT_DB_PATH": str(tmp_path / "bot.sqlite3")}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev_whatsapp.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "webhook verification: 200 1158201444" in proc.stdout
    assert "_आपने कहा:_ छोटे खीरे में कैलोरी की मात्रा" in proc.stdout
    assert re.search(r"1\. ```hi-59804-\d+``` · हिंदी · स्कोर 0\.9\d\d", proc.stdout)
    assert "```relevance_guard``` — passed" in proc.stdout and "(hi)" in proc.stdout
    assert re.search(r"--- voice reply \(.*\n.*: \d+ bytes of OGG/Opus", proc.stdout)
    assert "```send_voice``` — ok: media up-" in proc.stdout


async def test_a_question_typed_in_latin_letters_is_answered_in_latin_letters(front, graph):
    """Issue 34: the answer in Latin letters, the cited passage in Devanagari."""
    await post(front, text_message(WA_ID, "xbox 360 ki keemat kitni hai"))
    await post(front, text_message(WA_ID, "chai mein caffeine kitna hota hai"))
    answer_reply, refusal = bodies(graph)
    answer, *_, sources = answer_reply.split("\n\n")
    assert "kimat" in answer and not DEVANAGARI.search(answer), answer_reply
    assert DEVANAGARI.search(sources)
    assert "nahin mila" in refusal and not DEVANAGARI.search(refusal), refusal


# ------------------------------------------------------------- follow-ups (issue 44)

CUCUMBER = "How many calories are in a small cucumber?"
BIG_ONE = "and a big one?"
"""Refused alone by the fake pipeline; read after ``CUCUMBER``, answered from its passages
(en-59804-*: tests.fakes.read_followup)."""


async def test_a_follow_up_is_answered_from_the_previous_topic_until_new_or_expiry(
        front, graph, bot_settings):
    now_s = [1_764_547_200.0]
    front.services.wall_clock = lambda: now_s[0]
    sent = iter(range(1, 100))

    async def say(text: str) -> str:
        n_before = len(bodies(graph))
        await post(front, text_message(WA_ID, text, message_id=f"wamid.fu{next(sent)}"))
        [reply] = bodies(graph)[n_before:]
        return reply

    assert re.search(r"1\. ```en-59804-\d+``` · English", await say(CUCUMBER))
    now_s[0] += 60
    followup = await say(BIG_ONE)
    assert re.search(r"1\. ```en-59804-\d+``` · English", followup), followup
    why = await say("why")  # a bare word: WhatsApp has no command menu
    assert "Read as a follow-up of your previous question, searched as: calories small " \
           "cucumber big one" in why, why
    assert "```followup``` — used" in why

    assert (await say("new")).startswith("Starting afresh")  # bare, like why
    assert (await say(BIG_ONE)).startswith("I could not find this in my sources")

    await say(CUCUMBER)
    now_s[0] += 15 * 60 + 1  # bot.chat.conversation.CONTEXT_TTL_S, and a second
    assert (await say(BIG_ONE)).startswith("I could not find this in my sources")
    async with await Database.open(bot_settings.bot.db_path) as db:
        stored = await db.last_decision("whatsapp", int(WA_ID))
    assert stored.result.query == BIG_ONE and stored.result.followup is None
