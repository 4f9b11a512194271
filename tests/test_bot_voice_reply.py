"""Spoken replies end to end: the real PTB Application against the fake Bot API server, the Sarvam
stand-in (speech-to-text and espeak-ng text-to-speech) and the OpenAI stand-in on 127.0.0.1,
answering from the fake pipeline (tests/fakes.py: these tests check what is spoken, not which
passage answers). The voice notes sent back are checked with ffprobe."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from pathlib import Path

import pytest

from bot.chat.limits import MAX_SPEECH_CHARS
from bot.chat.services import Services
from bot.settings import BotSettings, Settings, TelegramSettings
from bot.telegram.app import build_application, polling
from bot.terminal.console import chat
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from clients.tts import SarvamTTSSettings
from standins.openai import Reply as LlmReply
from standins.sarvam import Reply
from standins.telegram import Call, FakeTelegram, parse_html
from standins.voice_notes import make_voice_note
from storage.db import Database
from tests.conftest import needs_tools

pytestmark = needs_tools("espeak-ng", "ffmpeg")

CHAT = 5151
XBOX = "How much does an Xbox 360 cost?"
PM = "Who is the Prime Minister of India?"
CUCUMBER_HI = "छोटे खीरे में कैलोरी की मात्रा"
DEVANAGARI = re.compile(r"[\u0900-\u097F]")


@pytest.fixture
def bot_settings(tmp_path, fake_settings, tg, sarvam, llm) -> Settings:
    return Settings(
        rag=fake_settings,
        sarvam=SarvamSettings(api_key="test-key", base_url=sarvam.base_url, timeout_s=5.0,
                              max_attempts=2, backoff_base_s=0.01),
        openrouter=OpenRouterSettings(api_key="llm-key", base_url=llm.base_url),
        telegram=TelegramSettings(token=tg.token, api_base=tg.base_url, file_base=tg.base_file_url,
                                  poll_timeout_s=1),
        bot=BotSettings(db_path=tmp_path / "bot.sqlite3", rate_limit_n=0),
        tts=SarvamTTSSettings(backoff_base_s=0.01),
    )


@pytest.fixture
async def bot(bot_settings, fake_pipeline):
    async with polling(build_application(bot_settings, fake_pipeline), bot_settings) as app:
        yield app


async def _lines(items: Iterable[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


async def texts(tg: FakeTelegram, n: int = 1) -> list[str]:
    return [parse_html(c.text) for c in await tg.wait_for("sendMessage", n, 30)]


def sent_ogg(call: Call) -> bytes:
    [data] = call.files.values()
    return data


def ffprobe(data: bytes, tmp_path) -> tuple[dict, dict]:
    """(format, the one audio stream) as ffprobe reads ``data`` from a file."""
    path = tmp_path / "reply.ogg"
    path.write_bytes(data)
    out = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-show_streams", "-of",
                          "json", str(path)], capture_output=True, check=True).stdout
    info = json.loads(out)
    [stream] = info["streams"]
    return info["format"], stream


async def why(tg: FakeTelegram, db_path=None, stage: str = "text_to_speech") -> str:
    """The /why reply, once the voice stages are in the trace (they are added after the text
    reply, and after sendVoice when there is one) when ``db_path`` is given."""
    if db_path is not None:
        for _ in range(600):
            async with await Database.open(db_path) as db:
                stored = await db.last_decision("telegram", CHAT)
            if stored is not None and stored.result.trace.get(stage) is not None:
                break
            await asyncio.sleep(0.05)
    await tg.push_text(CHAT, "/why")
    [text] = await texts(tg)
    return text


async def test_hindi_voice_note_gets_devanagari_text_then_an_ogg_opus_voice_note(
        bot, tg, sarvam, bot_settings, tmp_path):
    sarvam.enqueue(Reply(transcript=CUCUMBER_HI, language_code="hi-IN"))
    await tg.push_voice(CHAT, make_voice_note(CUCUMBER_HI, "hi"), duration_s=3)

    [answer] = await texts(tg)
    [voice] = await tg.wait_for("sendVoice", 1, 30)

    assert DEVANAGARI.search(answer.split("\n\n")[1]) and "स्रोत" in answer
    methods = tg.methods()
    assert methods.index("sendMessage") < methods.index("sendVoice")
    actions = [c.params["action"] for c in tg.calls if c.method == "sendChatAction"]
    assert actions[0] == "typing" and "record_voice" in actions
    [spoken] = sarvam.tts_calls
    assert spoken.body["target_language_code"] == "hi-IN"
    assert spoken.body["model"] == "bulbul:v3" and spoken.body["speaker"] == "shubh"
    assert DEVANAGARI.search(spoken.body["text"])
    assert spoken.body["text"] in answer  # the answer text, without its sources
    assert not re.search(r"hi-\d+-\d+|स्कोर|स्रोत", spoken.body["text"])
    fmt, stream = ffprobe(sent_ogg(voice), tmp_path)
    assert (fmt["format_name"], stream["codec_name"], stream["channels"]) == ("ogg", "opus", 1)
    duration_s = float(fmt["duration"])
    assert duration_s == pytest.approx(spoken.duration_s, abs=0.1)  # what Sarvam spoke
    assert 1.0 < duration_s < 60.0
    assert int(voice.params["duration"]) == -(-spoken.duration_s // 1)
    assert voice.params["reply_parameters"]["message_id"]

    explained = await why(tg, bot_settings.bot.db_path, "send_voice")
    assert re.search(r"text_to_speech — ok: hi-IN shubh bulbul:v3, 1 part\(s\), 1 attempt\(s\), "
                     r"\d+ chars \(\d+\.\d ms\)", explained), explained
    assert re.search(r"encode_voice — ok: [\d.]+ s of audio, \d+ bytes WAV -> \d+ bytes "
                     r"OGG/Opus", explained)
    assert re.search(r"send_voice — ok: \d+ bytes OGG/Opus", explained)


async def test_typed_question_gets_no_voice_note_unless_voice_is_on(bot, tg, sarvam,
                                                                     bot_settings):
    await tg.push_text(CHAT, XBOX)
    await texts(tg)
    await asyncio.sleep(0.3)
    assert "sendVoice" not in tg.methods() and not sarvam.tts_calls

    await tg.push_text(CHAT, "/voice on")
    [ack] = await texts(tg)
    assert ack == "Spoken replies: on. Every answer also comes as a voice note."
    await tg.push_text(CHAT, PM)  # refused: the refusal sentence is spoken, numbers included
    [refusal] = await texts(tg)
    await tg.wait_for("sendVoice", 1, 30)
    [spoken] = sarvam.tts_calls
    assert spoken.body["target_language_code"] == "en-IN"
    assert spoken.body["text"] == refusal
    floor = bot_settings.rag.floor_en
    assert re.search(rf"best match 0\.\d{{3}} is below the floor {floor:.3f}", spoken.body["text"])


async def test_voice_off_answers_a_voice_note_in_text_only(bot, tg, sarvam, bot_settings):
    await tg.push_text(CHAT, "/voice off")
    [ack] = await texts(tg)
    await tg.push_text(CHAT, "/voice")
    [current] = await texts(tg)
    sarvam.enqueue(Reply(transcript=XBOX, language_code="en-IN"))
    await tg.push_voice(CHAT, make_voice_note("xbox", "en"), duration_s=2)
    [answer] = await texts(tg)
    await asyncio.sleep(0.3)

    assert ack == "Spoken replies: off. Answers come as text only."
    assert current == f"{ack}\nUse /voice on, /voice off or /voice auto."
    assert "Sources" in answer
    assert "sendVoice" not in tg.methods() and not sarvam.tts_calls
    async with await Database.open(bot_settings.bot.db_path) as db:
        assert (await db.get_chat_settings("telegram", CHAT)).voice == "off"
    assert "text_to_speech" not in await why(tg)


@pytest.mark.parametrize(("script", "statuses", "stage"), [
    ([Reply.error(500), Reply.error(500)], [500, 500],
     r"text_to_speech — failed: server_error: HTTP 500 .*2 attempt\(s\) \(\d+\.\d ms\)"),
    ([Reply.error(429, "quota exceeded", retry_after=3600)], [429],
     r"text_to_speech — failed: rate_limited: HTTP 429 .*quota exceeded.*Retry-After 3600 s"),
    ([Reply(body={"request_id": "r", "audios": ["bm90IGEgd2F2"]})], [200],
     r"text_to_speech — failed: malformed: audio of 9 bytes is not a PCM WAV"),
], ids=["down", "over-quota", "bad-audio"])
async def test_tts_failure_leaves_the_text_answer_one_log_line_and_a_failed_stage(
        bot, tg, sarvam, bot_settings, caplog, script, statuses, stage):
    caplog.set_level(logging.INFO)
    sarvam.enqueue(Reply(transcript=CUCUMBER_HI, language_code="hi-IN"))
    sarvam.enqueue_tts(*script)
    await tg.push_voice(CHAT, make_voice_note(CUCUMBER_HI, "hi"), duration_s=3)

    [answer] = await texts(tg)
    explained = await why(tg, bot_settings.bot.db_path)

    assert "स्रोत" in answer
    assert "sendVoice" not in tg.methods()
    assert [c.status for c in sarvam.tts_calls] == statuses
    assert re.search(stage, explained), explained
    failures = [r for r in caplog.records if r.name == "bot.chat.voice_reply"]
    assert len(failures) == 1 and failures[0].levelno == logging.WARNING
    assert "status=failed" in failures[0].getMessage()


async def test_voice_note_refused_by_telegram_is_logged_and_traced(bot, tg, sarvam,
                                                                  bot_settings, caplog):
    caplog.set_level(logging.INFO)
    tg.fail_next("sendVoice", 400, "Bad Request: VOICE_MESSAGES_FORBIDDEN")
    sarvam.enqueue(Reply(transcript=XBOX, language_code="en-IN"))
    await tg.push_voice(CHAT, make_voice_note("xbox", "en"), duration_s=2)
    [answer] = await texts(tg)
    explained = await why(tg, bot_settings.bot.db_path, "send_voice")
    assert "Sources" in answer
    assert re.search(r"send_voice — failed: BadRequest: voice_messages_forbidden", explained,
                     re.IGNORECASE), explained
    [line] = [r.getMessage() for r in caplog.records if r.name == "bot.chat.voice_reply"]
    assert "status=failed" in line and "stage=send_voice" in line


async def test_slow_tts_times_out_and_the_text_stands(tg, sarvam, bot_settings, fake_pipeline):
    settings = replace(bot_settings, tts=replace(bot_settings.tts, timeout_s=0.3,
                                                 max_attempts=1))
    sarvam.enqueue(Reply(transcript=XBOX, language_code="en-IN"))
    sarvam.enqueue_tts(Reply(delay_s=3))
    async with polling(build_application(settings, fake_pipeline), settings):
        await tg.push_voice(CHAT, make_voice_note("xbox", "en"), duration_s=2)
        [answer] = await texts(tg)
        explained = await why(tg, settings.bot.db_path)
    assert "Sources" in answer and "sendVoice" not in tg.methods()
    assert "text_to_speech — failed: timeout: ReadTimeout after 0.3 s" in explained


@pytest.mark.slow  # espeak-ng speaks the bounded answer
async def test_3000_character_answer_is_bounded_before_it_is_spoken(
        tg, sarvam, llm, bot_settings, fake_pipeline, tmp_path):
    cited = fake_pipeline.ask(XBOX).citations[0].passage_id
    passage = fake_pipeline.index.passages[fake_pipeline.index.label_of(cited)].text
    long_answer = " ".join([passage] * (3000 // len(passage) + 1))
    sarvam.enqueue(Reply(transcript=XBOX, language_code="en-IN"))
    async with polling(build_application(bot_settings, fake_pipeline), bot_settings):
        await tg.push_text(CHAT, "/mode generative")
        await texts(tg)
        llm.enqueue(LlmReply.answer(long_answer, [cited]))
        await tg.push_voice(CHAT, make_voice_note("xbox", "en"), duration_s=2)
        await texts(tg, 1)
        [voice] = await tg.wait_for("sendVoice", 1, 60)
    # issue #23: repeated sentences dropped, cut at a sentence end, at most ~60 s of speech
    # (before, all 3,000 characters were spoken in two Sarvam parts)
    parts = [c.body["text"] for c in sarvam.tts_calls]
    assert len(parts) == 1 and len(parts[0]) <= MAX_SPEECH_CHARS
    assert parts[0].count(passage.split(".")[0]) == 1
    fmt, _ = ffprobe(sent_ogg(voice), tmp_path)
    total_s = sum(c.duration_s for c in sarvam.tts_calls)
    assert float(fmt["duration"]) == pytest.approx(total_s, abs=0.1)


async def test_repeated_answer_is_spoken_from_the_cache(bot, tg, sarvam, bot_settings):
    for _ in range(2):
        sarvam.enqueue(Reply(transcript=XBOX, language_code="en-IN"))
        await tg.push_voice(CHAT, make_voice_note("xbox", "en"), duration_s=2)
        await texts(tg)
        await tg.wait_for("sendVoice", 1, 30)
    voices = [c for c in tg.calls if c.method == "sendVoice"]
    assert len(sarvam.tts_calls) == 1
    assert sent_ogg(voices[0]) == sent_ogg(voices[1])
    explained = await why(tg, bot_settings.bot.db_path, "send_voice")
    assert "text_to_speech — cached: en-IN shubh bulbul:v3" in explained


async def test_console_writes_the_voice_reply_to_a_file_and_prints_its_path(
        tmp_path, fake_settings, fake_pipeline, sarvam):
    services = await Services.open(Settings(
        rag=fake_settings, sarvam=SarvamSettings(api_key="test-key", base_url=sarvam.base_url),
        openrouter=OpenRouterSettings(), telegram=TelegramSettings(),
        bot=BotSettings(db_path=tmp_path / "console.sqlite3"),
    ), fake_pipeline)
    out: list[str] = []
    try:
        await chat(services, _lines([XBOX, "/voice", "/voice on", PM, "/why"]), out.append)
    finally:
        await services.close()
    banner, answer, current, ack, refusal, path_line, explained = out
    assert "Spoken replies: automatic." in banner
    assert "Sources" in answer and current.startswith("Spoken replies: automatic.")
    assert ack == "Spoken replies: on. Every answer also comes as a voice note."
    match = re.fullmatch(r"\(voice reply: (.+)\)", path_line)
    assert match and refusal.startswith("I could not find this in my sources")
    path = Path(match.group(1))
    assert path.parent == tmp_path / "voice-replies" and path.suffix == ".ogg"
    fmt, stream = ffprobe(path.read_bytes(), tmp_path)
    assert (fmt["format_name"], stream["codec_name"]) == ("ogg", "opus")
    assert float(fmt["duration"]) == pytest.approx(sarvam.tts_calls[0].duration_s, abs=0.1)
    assert f"send_voice — ok: {path}" in explained and "text_to_speech — ok" in explained
