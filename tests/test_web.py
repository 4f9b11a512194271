"""The web channel end to end on 127.0.0.1: the real aiohttp server (``bot.web.app.serving``),
forms posted over real HTTP (httpx, its cookie jar being the browser session), answers from
the production pipeline over the shared sample's index (slow), voice notes of real speech
(espeak-ng, OGG/Opus) through the Sarvam stand-in, and ``python -m bot --web`` refusing an
exposed host without a token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from bot.chat.ratelimit import RateLimiter
from bot.chat.services import Services
from bot.settings import Settings
from bot.web.app import CHANNEL, chat_id_of, serving
from bot.web.settings import WebSettings
from standins.sarvam import Reply
from standins.voice_notes import make_voice_note
from storage.db import Database
from tests.conftest import ROOT, needs_tools
from tests.fakes import chat_settings

XBOX = "How much does an Xbox 360 cost?"
TOKEN = "s3cret-token-of-22-chars"
CUCUMBER_HI = "छोटे खीरे में कैलोरी की मात्रा"
DEVANAGARI = re.compile(r"[\u0900-\u097F]")
CITATION_EN = re.compile(r'<li id="src-[0-9a-f]{32}-1" value="1"><span class="src-lang">Passage '
                         r"in English</span>:.*?<code>en-\d+-\d+</code> · match 0\.\d{3}", re.S)
CITATION_HI = re.compile(r'<li id="src-[0-9a-f]{32}-1" value="1"><span class="src-lang">'
                         r"हिंदी में अंश</span>:.*?<code>hi-\d+-\d+</code> · मिलान 0\.\d{3}", re.S)
SOURCES_EN = "<h3>Sources</h3>"


@pytest.fixture
def bot_settings(tmp_path, settings, sarvam) -> Settings:
    return chat_settings(settings, tmp_path / "bot.sqlite3", sarvam)


async def page_over(bot_settings, pipeline) -> AsyncIterator:
    """The page's front end served on a free loopback port over ``pipeline``, its ``url`` set."""
    services = await Services.open(bot_settings, pipeline)
    try:
        async with serving(services, WebSettings(port=0)) as (front_end, url):
            front_end.url = url
            yield front_end
    finally:
        await services.close()


@pytest.fixture
async def front(bot_settings, pipeline) -> AsyncIterator:
    async for front_end in page_over(bot_settings, pipeline):
        yield front_end


@pytest.fixture
async def browser(front) -> AsyncIterator[httpx.AsyncClient]:
    """One browser session: a client with its own cookie jar."""
    async with httpx.AsyncClient(base_url=front.url, timeout=120) as client:
        yield client


def form_msg(page: str) -> str:
    """The fresh message id of the page's form."""
    return re.search(r'name="msg" id="msg" value="([0-9a-f]{32})"', page).group(1)


async def ask(client: httpx.AsyncClient, question: str) -> str:
    """Type ``question`` in the page's form and send it, as a browser does; the page after."""
    page = (await client.get("/")).text
    sent = await client.post("/ask", data={"question": question, "msg": form_msg(page)})
    assert sent.status_code == 303 and sent.headers["Location"].startswith("/#m-"), sent.text
    return (await client.get("/")).text


def articles(page: str) -> list[str]:
    return re.findall(r"<article .*?</article>", page, flags=re.S)


async def test_a_typed_english_question_is_answered_with_citations_kind_and_chain(
        front, browser, bot_settings):
    page = await ask(browser, XBOX)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert not re.search(r'(src|href|action)="(https?:)?//', page)  # nothing from elsewhere
    assert 'id="record"' in page  # speech-to-text is configured (the stand-in)
    [article] = articles(page)
    assert 'You asked</span><span lang="en">How much does an Xbox 360 cost?' in article
    assert re.search(r'lang="en" data-kind="(confident|hedged)"', article), article
    assert SOURCES_EN in article and CITATION_EN.search(article), article
    assert re.search(r"<summary>Why\? <span class=\"muted\">how this reply was decided "
                     r"\(decision \d+\)</span></summary>", article), article
    for stage in ("relevance_guard", "answerability_gate"):
        assert f"<td><code>{stage}</code></td>" in article, article
    # the inbox row: claimed, answered, closed with its decision
    chat_id = chat_id_of(browser.cookies["voice_rag_web"])
    async with await Database.open(bot_settings.bot.db_path) as db:
        stored = await db.last_decision(CHANNEL, chat_id)
    row = await front.inbox.store.get(CHANNEL, f"{chat_id}:{form_msg_of(article)}")
    assert row.status == "done" and row.decision_id == stored.id
    assert row.outcome.startswith(f"replied decision_id={stored.id} n_messages=1")
    assert stored.source == "text" and stored.result.query == XBOX


def form_msg_of(article: str) -> str:
    return re.search(r'id="m-([0-9a-f]{32})"', article).group(1)


async def test_a_typed_hindi_question_is_answered_in_devanagari(front, browser):
    [article] = articles(await ask(browser, CUCUMBER_HI))
    assert 'lang="hi" data-kind=' in article
    reply = re.search(r'<div class="reply">(.*?)</div>', article, re.S).group(1)
    assert len(DEVANAGARI.findall(reply)) > 40, reply
    assert "<h3>स्रोत</h3>" in article and CITATION_HI.search(article), article
    assert 'data-kind="confident"' in article or 'data-kind="hedged"' in article


async def test_a_reload_shows_the_conversation_and_another_session_sees_none_of_it(
        front, browser):
    await ask(browser, XBOX)
    await ask(browser, "/why")
    page = (await browser.get("/")).text  # a reload, same cookie
    first, why = articles(page)
    assert XBOX in first and SOURCES_EN in first
    assert "/why" in why and "<code>relevance_guard</code>" in why and "Xbox" in why
    async with httpx.AsyncClient(base_url=front.url) as stranger:
        other = (await stranger.get("/")).text
        assert articles(other) == [] and "Sources" not in other and 'id="empty"' in other
        assert stranger.cookies["voice_rag_web"] != browser.cookies["voice_rag_web"]
        msg = form_msg_of(first)
        assert (await stranger.get(f"/audio/{msg}")).status_code == 404


async def test_a_form_sent_twice_is_answered_once(front, browser, bot_settings):
    msg = form_msg((await browser.get("/")).text)
    for _ in range(2):
        sent = await browser.post("/ask", data={"question": XBOX, "msg": msg})
        assert sent.status_code == 303
    assert len(articles((await browser.get("/")).text)) == 1
    async with await Database.open(bot_settings.bot.db_path) as db:
        assert await db.count_decisions() == 1


async def test_another_question_under_a_used_form_id_is_answered_not_dropped(front, browser,
                                                                             caplog):
    """Back to a page the browser kept, then another question: the form posts the old
    ``msg``. It was taken for the form sent twice and dropped in silence (a bad-input probe
    found it); it is a new message, answered, with a log line."""
    caplog.set_level(logging.INFO)
    msg = form_msg((await browser.get("/")).text)
    for question in (XBOX, "/help"):
        sent = await browser.post("/ask", data={"question": question, "msg": msg})
        assert sent.status_code == 303 and sent.headers["Location"].startswith("/#m-")
    answer, helped = articles((await browser.get("/")).text)
    assert SOURCES_EN in answer and "/why" in helped
    assert "web_reused_msg" in caplog.text


async def test_too_many_messages_from_one_session_get_the_rate_limits_reply(front, browser):
    front.services.state = replace(front.services.state, limiter=RateLimiter(2, 60.0))
    await ask(browser, XBOX)
    await ask(browser, "/help")
    await ask(browser, "/help")
    page = await ask(browser, "/help")
    answer, helped, waited, dropped = articles(page)
    assert SOURCES_EN in answer and "/why" in helped
    assert re.search(r"Too many messages: please wait \d+ s\.", waited), waited
    assert 'class="reply"' not in dropped and "No reply: too many messages" in dropped
    async with httpx.AsyncClient(base_url=front.url) as other:  # another session is not held
        assert "/why" in articles(await ask(other, "/help"))[0]


@needs_tools("espeak-ng", "ffmpeg")
async def test_a_recorded_hindi_voice_note_is_answered_with_a_spoken_reply(front, browser,
                                                                          sarvam):
    sarvam.enqueue(Reply(transcript=CUCUMBER_HI, language_code="hi-IN"))
    msg = form_msg((await browser.get("/")).text)
    sent = await browser.post("/voice", data={"msg": msg}, files={
        "audio": ("question.ogg", make_voice_note(CUCUMBER_HI, "hi"), "audio/ogg")})
    assert sent.status_code == 303
    [article] = articles((await browser.get("/")).text)
    # what was heard stands as the question; the reply is the answer
    assert f'आपका वॉइस नोट</span><span lang="hi">{CUCUMBER_HI}</span>' in article
    assert CITATION_HI.search(article), article
    for stage in ("transcode", "speech_gate", "speech_to_text", "text_to_speech"):
        assert f"<td><code>{stage}</code></td>" in article, article
    assert f'src="/audio/{msg}"' in article
    audio = await browser.get(f"/audio/{msg}")
    assert audio.status_code == 200 and audio.headers["Content-Type"] == "audio/ogg"
    assert audio.content[:4] == b"OggS" and b"OpusHead" in audio.content[:100]


async def test_with_a_token_the_page_needs_it_once_then_a_cookie(bot_settings, pipeline):
    # and without a Sarvam key, no record button: speech-to-text could not hear it
    bot_settings = replace(bot_settings, sarvam=replace(bot_settings.sarvam, api_key=""))
    services = await Services.open(bot_settings, pipeline)
    try:
        async with serving(services, WebSettings(port=0, token=TOKEN)) as (_f, url):
            async with httpx.AsyncClient(base_url=url) as client:
                assert (await client.get("/")).status_code == 401
                assert (await client.post("/ask", data={"question": XBOX})).status_code == 401
                entered = await client.get("/", params={"token": TOKEN})
                assert entered.status_code == 303 and "token" not in entered.headers["Location"]
                page = await client.get("/")
                assert page.status_code == 200 and 'id="ask"' in page.text
                assert "s3cret" not in page.text and 'id="record"' not in page.text
            async with httpx.AsyncClient(base_url=url) as other:
                assert (await other.get("/", params={"token": "guess"})).status_code == 401
                bearer = await other.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
                assert bearer.status_code == 200
    finally:
        await services.close()


async def test_a_message_claimed_before_a_crash_is_answered_at_the_next_start(front, browser):
    await browser.get("/")
    chat_id = chat_id_of(browser.cookies["voice_rag_web"])
    for msg, sent_at, kind in (("a" * 32, time.time(), "text"),
                               ("b" * 32, time.time() - 3600, "text"),
                               ("d" * 32, time.time(), "voice")):
        payload = {"type": kind, "text": XBOX, "chat_id": chat_id, "sent_at": sent_at,
                   "language_code": "en-US", "question": XBOX, "bytes": 30_000}
        # stored before the answer, then the process died
        assert await front.inbox.claim(f"{chat_id}:{msg}", chat_id, json.dumps(payload))
    async with serving(front.services, WebSettings(port=0)) as (restarted, url):
        await restarted.drain()
        answered, late, lost = articles((await browser.get(url + "/")).text)  # same cookie
    assert 'id="m-' + "a" * 32 in answered and SOURCES_EN in answered
    assert "too late" in late and "Sources" not in late
    # a recording is kept in memory only (inbox rows are never deleted): lost in the crash
    assert "download" in lost and 'data-kind="error"' in lost, lost
    row = await front.inbox.store.get(CHANNEL, f"{chat_id}:{'b' * 32}")
    assert row.status == "done" and row.outcome.startswith("stale_apology age_s=")


@pytest.mark.postgres
async def test_on_postgresql_the_dispatcher_answers_and_the_form_waits_for_it(
        bot_settings, pipeline, pg_url):
    """Replicas' inbox (``bot.chat.dispatch``): the message is handed to the dispatcher, and the
    form is sent back to the page once it is answered."""
    shared = replace(bot_settings, bot=replace(bot_settings.bot, database_url=pg_url))
    services = await Services.open(shared, pipeline)
    try:
        async with serving(services, WebSettings(port=0)) as (front, url):
            assert front.inbox.is_shared
            async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                [article] = articles(await ask(client, XBOX))
                chat_id = chat_id_of(client.cookies["voice_rag_web"])
            assert SOURCES_EN in article and "answering…" not in article
            row = await front.inbox.store.get(CHANNEL, f"{chat_id}:{form_msg_of(article)}")
            assert row.status == "done" and row.claimed_by is not None
            assert row.outcome.startswith(f"replied decision_id={row.decision_id} ")
    finally:
        await services.close()


async def test_a_recording_over_the_upload_limit_is_refused_before_it_is_read(bot_settings,
                                                                            pipeline):
    services = await Services.open(bot_settings, pipeline)
    try:
        async with serving(services, WebSettings(port=0, max_upload_mb=0.05)) as (front, url):
            async with httpx.AsyncClient(base_url=url) as client:
                sent = await client.post("/voice", data={"msg": "c" * 32}, files={
                    "audio": ("q.webm", b"\0" * 200_000, "audio/webm")})
                assert sent.status_code == 303 and sent.headers["Location"] == \
                    "/?notice=too_big"
                page = (await client.get(sent.headers["Location"])).text
                assert "That recording is over 0.05 MB" in page and articles(page) == []
            assert await services.db.count_decisions() == 0
    finally:
        await services.close()


async def test_bad_posts_get_a_stated_reply_never_silence_or_a_traceback(front, browser,
                                                                        caplog):
    """Found by trying it: an empty question, a body that is not the page's form, an empty
    recording, and a body declared far over the limit (refused from its header, before a
    byte of it is read) each get a notice or a 400 saying what to send, and a log line."""
    caplog.set_level(logging.INFO)
    page = (await browser.get("/")).text
    sent = await browser.post("/ask", data={"question": "  \n ", "msg": form_msg(page)})
    assert sent.status_code == 303 and sent.headers["Location"] == "/?notice=empty"
    assert "Type a question first." in (await browser.get(sent.headers["Location"])).text
    for body in ({"json": {"question": "hi"}}, {"data": {"msg": form_msg(page)}},
                 # a charset Python does not know; a multipart part whose header does not parse
                 # (both answered 500 with a traceback before: issue 43's bad-input probe)
                 {"content": b"question=xbox", "headers": {
                     "Content-Type": "application/x-www-form-urlencoded; charset=bogus-xx"}},
                 {"content": b"--BB\r\ngarbage", "headers": {
                     "Content-Type": "multipart/form-data; boundary=BB"}}):
        refused = await browser.post("/ask", **body)
        assert refused.status_code == 400 and "field 'question'" in refused.text
    sent = await browser.post("/voice", data={"msg": form_msg(page)},
                              files={"audio": ("q.webm", b"", "audio/webm")})
    assert sent.headers["Location"] == "/?notice=no_audio"
    assert "No recording arrived" in (await browser.get(sent.headers["Location"])).text
    host, port = front.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:  # a header announcing 10 GB, then only a few bytes: answered at once from the header
        writer.write(b"POST /voice HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                     b"boundary=b\r\nContent-Length: 10000000000\r\n\r\n--b\r\n")
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    assert status.startswith(b"HTTP/1.1 303"), status
    assert articles((await browser.get("/")).text) == []  # nothing was taken as a question
    assert "web_refused reason=too_big" in caplog.text and "Traceback" not in caplog.text
    assert caplog.text.count("web_refused reason=malformed") == 2


async def test_one_address_cannot_take_a_new_session_for_every_question(front):
    front.new_sessions = RateLimiter(2, 3600.0)
    codes = []
    for _ in range(3):
        async with httpx.AsyncClient(base_url=front.url) as fresh:  # no cookie: a new session
            codes.append((await fresh.post("/ask", data={"question": "/help"})).status_code)
    assert codes == [303, 303, 429]
    async with httpx.AsyncClient(base_url=front.url) as fresh:
        refused = await fresh.post("/ask", data={"question": "/help"})
        assert "too many new sessions" in refused.text and refused.headers["Retry-After"]


@pytest.mark.slow  # spawns python -m bot
def test_binding_beyond_loopback_without_a_token_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOT_WEB_")}
    env |= {"BOT_WEB_HOST": "0.0.0.0", "BOT_DB_PATH": str(tmp_path / "bot.sqlite3")}
    proc = subprocess.run([sys.executable, "-m", "bot", "--web"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: the web page would be reachable beyond this machine (host 0.0.0.0) "
        "with no token: set BOT_WEB_TOKEN (e.g. $(openssl rand -hex 16)), or bind to "
        "127.0.0.1"], proc.stderr
    with pytest.raises(ValueError, match="BOT_WEB_PORT"):
        WebSettings.from_env({"BOT_WEB_PORT": "99999"})


def test_chat_ids_are_stable_per_session_and_differ_between_sessions():
    token = "a" * 32
    assert chat_id_of(token) == chat_id_of(token) < 2**48
    assert len({chat_id_of(uuid.uuid4().hex) for _ in range(1000)}) == 1000
    assert replace(WebSettings(), port=8082).port == WebSettings().port == 8082


# ------------------------------------------------------------- follow-ups (issue 44)


@pytest.fixture
async def fake_front(tmp_path, fake_settings, fake_pipeline, sarvam) -> AsyncIterator:
    """The page over the fake pipeline (tests/fakes.py), whose follow-up reading is a simple
    stand-in for the real one."""
    async for front_end in page_over(chat_settings(fake_settings, tmp_path / "bot.sqlite3",
                                                   sarvam), fake_pipeline):
        yield front_end


async def test_a_follow_up_is_answered_from_the_previous_topic_until_new_or_expiry(fake_front):
    """"and a big one?" is refused alone by the fake pipeline and answered from the cucumber
    passages (en-59804-*) after the cucumber question."""
    now_s = [1_764_547_200.0]
    fake_front.services.wall_clock = lambda: now_s[0]
    cucumber, big_one = "How many calories are in a small cucumber?", "and a big one?"
    passage = re.compile(r"<code>en-59804-\d+</code>")
    async with httpx.AsyncClient(base_url=fake_front.url, timeout=60) as browser:
        assert passage.search(articles(await ask(browser, cucumber))[-1])
        followup = articles(await ask(browser, big_one))[-1]
        assert passage.search(followup), followup
        assert "<code>followup</code>" in followup  # the decision chain shows how it was read
        chat_id = chat_id_of(browser.cookies["voice_rag_web"])
        stored = await fake_front.services.db.last_decision(CHANNEL, chat_id)
        assert stored.result.followup.is_followup
        assert stored.result.searched == "calories small cucumber big one"

        assert "Starting afresh" in articles(await ask(browser, "/new"))[-1]
        alone = articles(await ask(browser, big_one))[-1]
        assert "I could not find this in my sources" in alone and not passage.search(alone)

        await ask(browser, cucumber)
        now_s[0] += 15 * 60 + 1  # bot.chat.conversation.CONTEXT_TTL_S, and a second
        expired = articles(await ask(browser, big_one))[-1]
        assert "I could not find this in my sources" in expired and not passage.search(expired)
        stored = await fake_front.services.db.last_decision(CHANNEL, chat_id)
        assert stored.result.followup is None
