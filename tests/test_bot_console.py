"""The console chat runs the same service functions as the Telegram handlers, without a token.

The first test and ``python -m bot --console`` answer from the shared-sample index (slow); the
others, which test the console's handling rather than its answers, from the fake pipeline
(tests/fakes.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from bot.chat.render import PLAIN
from bot.chat.services import Services
from bot.chat.types import Asker
from bot.settings import BotSettings, Settings, TelegramSettings
from bot.terminal.console import CHANNEL, CONSOLE_CHAT_ID, chat, handle_line
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from standins.sarvam import Reply, SarvamStandin
from standins.voice_notes import make_long_voice_note, make_voice_note
from tests.conftest import needs_tools

pytestmark = needs_tools("espeak-ng", "ffmpeg")

ROOT = Path(__file__).resolve().parents[1]
CUCUMBER_HI = "छोटे खीरे में कैलोरी की मात्रा"


async def _lines(items: Iterable[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


async def test_console_answers_text_voice_why_and_lang(tmp_path, settings, pipeline):
    note = tmp_path / "question.ogg"
    note.write_bytes(make_voice_note(CUCUMBER_HI, "hi"))
    async with SarvamStandin(api_key="k") as sarvam:
        sarvam.enqueue(Reply(CUCUMBER_HI, language_code="hi-IN"))
        services = await Services.open(Settings(
            rag=settings, sarvam=SarvamSettings(api_key="k", base_url=sarvam.base_url),
            openrouter=OpenRouterSettings(), telegram=TelegramSettings(),
            bot=BotSettings(db_path=tmp_path / "console.sqlite3"),
        ), pipeline)
        out: list[str] = []
        try:
            await chat(services, _lines(["How much does an Xbox 360 cost?", "", "/why",
                                         f"  {note}  ", "/lang te", "/quit", "not read"]),
                       out.append)
            stored = await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID)
        finally:
            await services.close()
    assert len(out) == 6
    assert out[0].startswith("Console chat: settings of chat id 0 in ")
    assert "Sources" in out[1] and "&amp;" not in out[1]
    assert out[2].startswith("How I decided the last answer:")
    assert out[3].startswith(f"आपने कहा: {CUCUMBER_HI}") and "स्रोत" in out[3]
    assert out[4].startswith("(voice reply: ") and out[4].endswith(".ogg)")  # /voice auto
    assert out[5] == "సమాధాన భాష తెలుగుగా మార్చబడింది."
    assert stored.source == "voice" and stored.transcript == CUCUMBER_HI


async def test_voice_note_whose_transcript_has_a_lone_surrogate_and_numeric_language_is_answered(
        tmp_path, fake_settings, fake_pipeline):
    note = tmp_path / "xbox.ogg"
    note.write_bytes(make_voice_note("How much does an Xbox 360 cost?", "en"))
    async with SarvamStandin(api_key="k") as sarvam:
        sarvam.enqueue(Reply("How much does an Xbox 360 cost? \ud800", language_code=7))
        services = await Services.open(Settings(
            rag=fake_settings, sarvam=SarvamSettings(api_key="k", base_url=sarvam.base_url),
            openrouter=OpenRouterSettings(), telegram=TelegramSettings(),
            bot=BotSettings(db_path=tmp_path / "console.sqlite3"),
        ), fake_pipeline)
        try:
            [reply] = await ask(services, str(note))
            stored = await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID)
        finally:
            await services.close()
    assert "Sources" in reply
    assert stored.transcript == "How much does an Xbox 360 cost?"


@pytest.mark.slow  # a 40 s note and a 1 s speech deadline
async def test_voice_note_over_the_whole_note_speech_deadline_gets_speech_service_too_slow(
        tmp_path, fake_settings, fake_pipeline):
    note = tmp_path / "long.ogg"
    note.write_bytes(make_long_voice_note(40))  # 2 chunks
    async with SarvamStandin(api_key="k") as sarvam:
        sarvam.enqueue(*[Reply("part", delay_s=0.8)] * 2)
        services = await Services.open(Settings(
            rag=fake_settings, sarvam=SarvamSettings(api_key="k", base_url=sarvam.base_url,
                                                timeout_s=5.0, total_timeout_s=1.0),
            openrouter=OpenRouterSettings(), telegram=TelegramSettings(),
            bot=BotSettings(db_path=tmp_path / "console.sqlite3"),
        ), fake_pipeline)
        try:
            [reply] = await ask(services, str(note))
            why = ((await ask(services, "/why"))[0])
        finally:
            await services.close()
    assert reply.startswith("The speech service is too slow right now."), reply
    assert "1 of 2 chunk(s) transcribed in 1 s" in why, why


@pytest.fixture
async def services(tmp_path, fake_settings, fake_pipeline) -> AsyncIterator[Services]:
    """Services on the fake pipeline (tests/fakes.py), no speech-to-text (these tests never
    reach it)."""
    opened = await Services.open(Settings(
        rag=fake_settings, sarvam=SarvamSettings(), openrouter=OpenRouterSettings(),
        telegram=TelegramSettings(), bot=BotSettings(db_path=tmp_path / "console.sqlite3"),
    ), fake_pipeline)
    try:
        yield opened
    finally:
        await opened.close()


async def ask(services: Services, line: str) -> list[str]:
    reply = await handle_line(services, Asker(CHANNEL, CONSOLE_CHAT_ID), line)
    return [PLAIN.render(text) for text in reply.messages]


@pytest.mark.parametrize("line", [
    "How much does an Xbox 360 cost? " * 10,  # 320 bytes: more than a file name may have
    "~ how much does an Xbox 360 cost",  # "~ how ..." is a user with no home to expand
], ids=["over-255-bytes", "tilde-unknown-user"])
async def test_line_that_cannot_be_a_file_name_is_asked_as_a_question(services, line):
    [reply] = await ask(services, line)
    assert "Sources" in reply or "could not find" in reply, reply
    stored = await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID)
    assert stored.source == "text"


@pytest.mark.parametrize("line", ["/dev/null", "~/no-such-note.ogg", "./missing.wav",
                                  "/no/such/dir/", "{tmp}"])
async def test_path_to_no_readable_audio_file_says_so(services, tmp_path, line):
    line = line.format(tmp=tmp_path)
    [reply] = await ask(services, line)
    assert reply.startswith(f"No audio file at {line}: it does not exist"), reply
    assert await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID) is None


@pytest.mark.parametrize("quote", [
    lambda path: f"'{path}'",
    lambda path: f'"{path}"',
    lambda path: path.replace(" ", "\\ "),
], ids=["single-quotes", "double-quotes", "backslash-escapes"])
async def test_dragged_and_dropped_path_with_shell_quoting_is_sent_as_a_voice_note(
        services, tmp_path, quote):
    note = tmp_path / "my note.ogg"
    note.write_bytes(make_voice_note("how much does an xbox 360 cost", "en"))
    [reply] = await ask(services, quote(str(note)))  # no SARVAM_API_KEY: refused after reading
    assert reply.startswith("The speech service is not available right now."), reply
    assert (await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID)).source == "voice"


async def test_quoted_path_to_a_missing_file_names_it_without_quotes(services, tmp_path):
    missing = tmp_path / "gone.ogg"
    [reply] = await ask(services, f"'{missing}'")
    assert reply.startswith(f"No audio file at {missing}: it does not exist"), reply


async def test_file_that_fails_to_read_gets_could_not_read_and_the_session_goes_on(services):
    out: list[str] = []
    await chat(services, _lines(["/proc/self/mem", "/why", "How much does an Xbox 360 cost?"]),
               out.append)
    assert out[1].startswith("I could not read this audio."), out[1]
    assert "cannot read /proc/self/mem: Input/output error" in (out[2]), out[2]
    assert "Sources" in out[3]


async def test_unknown_command_says_so_in_the_chat_language(services):
    [english] = await ask(services, "/foo bar")
    await ask(services, "/lang hi")
    [hindi] = await ask(services, "/foo")
    assert english.startswith("Unknown command /foo. I understand text questions")
    assert hindi.startswith("अज्ञात कमांड /foo।")
    assert await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID) is None
    [long] = await ask(services, "/" + "x" * 5000)
    assert long.startswith("अज्ञात कमांड /" + "x" * 31 + "…।")  # cut as on Telegram


async def test_console_starts_by_saying_the_language_and_mode_and_where_they_are_stored(
        services):
    out: list[str] = []
    await chat(services, _lines([]), out.append)
    db_path = services.settings.bot.db_path
    assert out == [
        f"Console chat: settings of chat id 0 in {db_path}, kept between sessions (/lang, "
        "/mode and /voice change them; /help lists the commands, /quit leaves).\n"
        "Answer language: automatic (the language you ask in).\n"
        "Answer mode: extractive (sentences quoted from the sources).\n"
        "Spoken replies: automatic. Questions asked by voice note also get a voice note.\n"
        "Without SARVAM_API_KEY, answers stay text only."
    ]


async def test_lang_and_mode_chosen_in_one_console_session_are_shown_when_the_next_starts(
        services, fake_pipeline):
    await chat(services, _lines(["/lang hi", "/mode generative"]), lambda _: None)
    later = await Services.open(services.settings, fake_pipeline)
    out: list[str] = []
    try:
        await chat(later, _lines([]), out.append)
    finally:
        await later.close()
    [_, lang, mode, no_key, _, _] = out[0].split("\n")
    assert lang == "जवाब की भाषा: हिंदी।"
    assert mode.startswith("जवाब का तरीका: रचित")
    assert no_key == "OPENROUTER_API_KEY के बिना जवाब उद्धरण ही रहेंगे (स्रोतों से सीधे लिए गए वाक्य)।"


async def test_lang_and_mode_without_argument_show_the_current_setting_and_usage(services):
    assert await ask(services, "/lang") == [
        "Answer language: automatic (the language you ask in).\n"
        "Usage: /lang en | hi | gu | te | auto"]
    assert await ask(services, "/mode") == [
        "Answer mode: extractive (sentences quoted from the sources).\n"
        "Usage: /mode extractive | generative"]
    await ask(services, "/lang gu")
    assert await ask(services, "/lang") == ["જવાબની ભાષા: ગુજરાતી.\n"
                                            "ઉપયોગ: /lang en | hi | gu | te | auto"]


async def test_command_and_argument_separated_by_a_tab_or_spaces_work(services):
    """As on Telegram, whose clients split a command's arguments at any whitespace."""
    assert await ask(services, "/voice\toff") == ["Spoken replies: off. Answers come as text only."]
    assert (await services.db.get_chat_settings(CHANNEL, CONSOLE_CHAT_ID)).voice == "off"
    [reply] = await ask(services, "/lang   hi")
    assert reply.startswith("जवाब की भाषा"), reply


@pytest.mark.parametrize(("lang", "note"), [
    ("en", "Without OPENROUTER_API_KEY, answers stay extractive (sentences quoted from the "
           "sources)."),
    ("hi", "OPENROUTER_API_KEY के बिना जवाब उद्धरण ही रहेंगे (स्रोतों से सीधे लिए गए वाक्य)।"),
    ("gu", "OPENROUTER_API_KEY વિના જવાબો અવતરણ જ રહેશે (સ્રોતોમાંથી સીધાં લીધેલાં વાક્યો)."),
    ("te", "OPENROUTER_API_KEY లేకుండా సమాధానాలు ఉల్లేఖనగానే ఉంటాయి (మూలాల నుండి నేరుగా "
           "తీసుకున్న వాక్యాలు)."),
], ids=["en", "hi", "gu", "te"])
async def test_generative_mode_without_openrouter_key_is_set_but_says_answers_stay_extractive(
        services, lang, note):
    await ask(services, f"/lang {lang}")
    [reply] = await ask(services, "/mode generative")
    confirmation, said = reply.split("\n")
    assert said == note
    assert confirmation != note
    assert (await services.db.get_chat_settings(CHANNEL, CONSOLE_CHAT_ID)).mode == "generative"


def test_python_m_bot_console_needs_no_token(tmp_path, sample_index_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "SARVAM_"))}
    env |= {"VOICE_RAG_INDEX_DIR": str(sample_index_dir),
            "BOT_DB_PATH": str(tmp_path / "console.sqlite3")}
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "--console"], cwd=ROOT, env=env, timeout=120,
        input="Who is the Prime Minister of India?\n/why\n", capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "is below the floor 0.840" in proc.stdout
    assert "relevance_guard — refused" in proc.stdout


async def test_why_after_a_voice_note_of_unknown_duration_says_duration_unknown(
        services, tmp_path):
    note = tmp_path / "tone.ogg"
    note.write_bytes(make_voice_note("how much does an xbox 360 cost", "en"))
    [reply] = await ask(services, str(note))  # no SARVAM_API_KEY: refused after the checks
    assert reply.startswith("The speech service is not available right now.")
    why = ((await ask(services, "/why"))[0])
    assert f"voice_checks — passed: {note.stat().st_size} bytes, duration unknown" in why
    assert "None" not in why


async def test_opening_services_freezes_the_loaded_objects_once(services, monkeypatch):
    # the pipeline and everything loaded with it leave the cyclic collector's reach: its full
    # collections took 65-81 ms on the event loop's thread (scripts/bench_bot.py)
    import gc

    from bot.chat.services import freeze_loaded_objects

    assert gc.get_freeze_count() > 1000
    monkeypatch.setattr(gc, "collect", lambda *a: pytest.fail("collected a second time"))
    freeze_loaded_objects()


async def test_a_question_typed_in_latin_letters_is_answered_in_latin_letters(services):
    """Issue 34: Hindi typed in Latin letters is read as Hindi and answered in Latin letters,
    the cited passage beside it in Devanagari; the decision log keeps what was typed."""
    [reply] = await ask(services, "xbox 360 ki keemat kitni hai")
    answer, *_, sources = reply.split("\n\n")
    assert "kimat" in answer and not re.search(r"[\u0900-\u097f]", answer), reply
    assert sources.startswith("srot") and re.search(r"[\u0900-\u097f]", sources)
    stored = await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID)
    assert stored.result.query == "xbox 360 ki keemat kitni hai"
    assert stored.result.searched == "एक्सबॉक्स 360 की कीमत कितनी है"


async def test_a_follow_up_is_answered_from_the_previous_topic_until_new_or_expiry(services):
    """Issue 44: "and a big one?" is refused alone by the fake pipeline and answered from the
    cucumber passages (en-59804-*) after the cucumber question."""
    now_s = [1_764_547_200.0]
    services.wall_clock = lambda: now_s[0]
    cucumber, big_one = "How many calories are in a small cucumber?", "and a big one?"
    out: list[str] = []
    await chat(services, _lines([cucumber, big_one, "/why", "/new", big_one]), out.append)
    _, first, followup, why, new, alone = out
    assert re.search(r"1\. en-59804-\d+ · English", first), first
    assert re.search(r"1\. en-59804-\d+ · English", followup), followup
    assert "Read as a follow-up of your previous question, searched as: calories small " \
           "cucumber big one" in why
    assert new.startswith("Starting afresh") and alone.startswith("I could not find this")

    await ask(services, cucumber)
    now_s[0] += 15 * 60 + 1  # bot.chat.conversation.CONTEXT_TTL_S, and a second
    [expired] = await ask(services, big_one)
    assert expired.startswith("I could not find this in my sources"), expired
    stored = await services.db.last_decision(CHANNEL, CONSOLE_CHAT_ID)
    assert stored.result.followup is None
