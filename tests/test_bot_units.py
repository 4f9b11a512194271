"""Pure bot helpers: rate limit, who a message is for, settings, start-up checks, console text."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from telegram import Chat, File, Message, MessageEntity, User

from bot.chat.commands import Command, parse_command
from bot.chat.ratelimit import RateLimiter
from bot.chat.render import PLAIN, Span, Text
from bot.chat.types import Asker, ui_language
from bot.cli import main
from bot.errors import SettingsError, StartupError, VoiceDownloadError
from bot.settings import Settings
from bot.startup import check_startup
from bot.telegram.handlers import download
from bot.telegram.incoming import (
    asker_of,
    is_for_bot,
    message_kind,
    question_text,
)
from bot.telegram.startup import check_telegram_settings
from rag.language import script_language
from storage.ratelimit import RateDecision

BOT_ID, BOT_NAME = 999, "voicerag_test_bot"


def _message(text: str, chat_type: str = "private", reply_to_bot: bool = False) -> Message:
    user = User(7, "Asha", is_bot=False, language_code="hi")
    chat = Chat(-100 if chat_type != "private" else 7, chat_type)
    entities = []
    at = text.find(f"@{BOT_NAME}")
    if at >= 0:
        entities.append(MessageEntity(MessageEntity.MENTION, at, len(BOT_NAME) + 1))
    replied = None
    if reply_to_bot:
        replied = Message(1, datetime.now(UTC), chat, from_user=User(BOT_ID, "Bot", is_bot=True))
    return Message(2, datetime.now(UTC), chat, from_user=user, text=text, entities=entities,
                   reply_to_message=replied)


def test_rate_limiter_allows_n_per_window_then_says_how_long_to_wait():
    limiter = RateLimiter(max_n=2, window_s=30)
    assert limiter.acquire(1, 100.0).is_allowed
    assert limiter.acquire(1, 101.0) == RateDecision(0, is_notice=False)
    assert limiter.acquire(1, 110.2).wait_s == 20  # the first event leaves the window at 130.0
    assert limiter.acquire(2, 110.2).is_allowed  # per user
    assert limiter.acquire(1, 130.0).is_allowed


def test_rate_limiter_with_zero_limit_allows_everything():
    limiter = RateLimiter(max_n=0, window_s=30)
    assert all(limiter.acquire(1, 1.0).is_allowed for _ in range(100))
    assert limiter.peek_wait_s(1, 1.0) == 0


def test_peeking_at_the_rate_limiter_twice_consumes_nothing():
    limiter = RateLimiter(max_n=1, window_s=30)
    assert limiter.peek_wait_s(1, 100.0) == 0 and limiter.peek_wait_s(1, 100.0) == 0
    assert limiter.acquire(1, 100.0).is_allowed  # the peeks left the one slot free
    assert limiter.peek_wait_s(1, 101.0) == 29 and limiter.peek_wait_s(1, 101.0) == 29
    # peeking at a limited user records no refusal: the first refusal is still the notice
    assert limiter.acquire(1, 102.0) == RateDecision(28, is_notice=True)
    assert limiter.peek_wait_s(1, 130.0) == 0


def test_rate_limiter_tells_a_user_who_heeded_the_notice_again():
    limiter = RateLimiter(max_n=1, window_s=30)
    assert limiter.acquire(1, 100.0).is_allowed
    assert limiter.peek_wait_s(1, 101.0) and not limiter.peek_wait_s(2, 101.0)
    assert limiter.acquire(1, 101.0) == RateDecision(29, is_notice=True)
    assert limiter.acquire(2, 101.0).is_allowed  # per user
    assert not limiter.peek_wait_s(1, 130.0)
    assert limiter.acquire(1, 130.0).is_allowed  # waited as told: allowed again
    # the first refusal of the next burst is told to wait again, however soon it comes
    assert limiter.acquire(1, 130.5) == RateDecision(30, is_notice=True)
    assert limiter.acquire(1, 131.0) == RateDecision(29, is_notice=False)


def test_rate_limiter_tells_a_steady_flood_once():
    limiter = RateLimiter(max_n=2, window_s=6)
    verdicts = [limiter.acquire(1, 100.0 + 0.5 * i) for i in range(40)]  # one per 0.5 s, 20 s
    answers = sum(v.is_allowed for v in verdicts)
    notices = sum(v.is_notice for v in verdicts)
    assert notices == 1 and answers == 2 + 2 * 3  # 2 at once, then 2 per 6 s slot


def test_private_text_is_always_a_question():
    assert question_text(_message("what is rust"), BOT_NAME, BOT_ID) == "what is rust"


def test_group_text_without_mention_or_reply_is_ignored():
    assert question_text(_message("what is rust", "group"), BOT_NAME, BOT_ID) is None


def test_group_mention_is_a_question_without_the_mention():
    text = question_text(_message(f"@{BOT_NAME} what is rust", "supergroup"), BOT_NAME, BOT_ID)
    assert text == "what is rust"


def test_group_reply_to_the_bot_is_a_question():
    message = _message("and in 2010?", "group", reply_to_bot=True)
    assert question_text(message, BOT_NAME, BOT_ID) == "and in 2010?"
    assert is_for_bot(message, BOT_NAME, BOT_ID)
    assert not is_for_bot(_message("", "group"), BOT_NAME, BOT_ID)


def test_a_command_is_the_first_word_without_the_bot_name():
    assert parse_command(f"/Foo@{BOT_NAME} bar") == Command("foo", "bar", "/Foo")
    assert parse_command("/") is None
    assert parse_command("what is /foo") is None
    assert parse_command("/voice\toff") == Command("voice", "off", "/voice")
    assert message_kind(_message("/foo")) == "command"
    assert message_kind(_message("hello")) == "text"


def test_long_unknown_command_is_cut_to_32_characters():
    assert parse_command("/foo-" + "x" * 4080).typed == "/foo-" + "x" * 27 + "…"
    assert parse_command("/" + "a" * 31).typed == "/" + "a" * 31


def test_bare_commands_only_where_the_channel_has_no_menu():
    assert parse_command("why") is None
    assert parse_command("why", bare_words=True) == Command("why", None, "/why")
    assert parse_command("Why?", bare_words=True).name == "why"
    assert parse_command("lang hi", bare_words=True) == Command("lang", "hi", "/lang")
    assert parse_command("HELP", bare_words=True).name == "help"
    assert parse_command("why is the sky blue", bare_words=True) is None
    assert parse_command("language of the people", bare_words=True) is None
    assert parse_command("", bare_words=True) is None


def test_group_message_is_for_the_bot_only_as_its_command_a_reply_or_a_mention():
    assert is_for_bot(_message("/foo"), BOT_NAME, BOT_ID)  # private
    assert is_for_bot(_message(f"/foo@{BOT_NAME.upper()} x", "supergroup"), BOT_NAME, BOT_ID)
    assert is_for_bot(_message("", "supergroup", reply_to_bot=True), BOT_NAME, BOT_ID)
    assert is_for_bot(_message(f"/foo @{BOT_NAME}", "supergroup"), BOT_NAME, BOT_ID)
    assert not is_for_bot(_message("/foo", "supergroup"), BOT_NAME, BOT_ID)
    assert not is_for_bot(_message("/foo@other_bot", "supergroup"), BOT_NAME, BOT_ID)
    assert not is_for_bot(_message("", "supergroup"), BOT_NAME, BOT_ID)


def test_asker_carries_chat_user_message_and_interface_language():
    asker = asker_of(_message("hello"))
    assert (asker.chat_id, asker.user_id, asker.message_id, asker.interface_lang) == (7, 7, 2, "hi")


def test_ui_language_prefers_chat_choice_then_script_then_telegram_language():
    asker = Asker("telegram", 1, 1, language_code="te-IN")
    assert ui_language("gu", asker, "hi") == "gu"
    assert ui_language("auto", asker, "hi") == "hi"
    assert ui_language("auto", asker) == "te"
    assert ui_language("auto", Asker("telegram", 1, 1, language_code="fr")) == "en"


@pytest.mark.parametrize(("text", "lang"), [
    ("what is rust", "en"), ("Xbox 360 की कीमत", "hi"), ("ગુજરાતની રાજધાની", "gu"),
    ("తెలంగాణ రాజధాని", "te"), ("😀🎉 1234", None), ("印度总理是谁？", None),
    ("இந்தியாவின் பிரதமர் யார்?", None), ("", None),
])
def test_script_language_is_none_when_no_supported_script_decides(text, lang):
    assert script_language(text) == lang


def test_settings_read_sections_allow_list_and_paas_port():
    settings = Settings.from_env({
        "TELEGRAM_TOKEN": "1:x", "TELEGRAM_API_BASE": "http://127.0.0.1:1/bot", "PORT": "5000",
        "BOT_ALLOWED_USER_IDS": "12, 34", "BOT_RATE_LIMIT_N": "0", "VOICE_RAG_FLOOR_HI": "0.9",
        "SARVAM_API_KEY": "k",
    })
    assert settings.telegram.api_base == "http://127.0.0.1:1/bot"
    assert settings.telegram.webhook_port == 5000
    assert settings.bot.allowed_user_ids == (12, 34)
    assert settings.bot.rate_limit_n == 0
    assert settings.rag.floor_hi == 0.9 and settings.sarvam.api_key == "k"


def test_settings_reject_non_numeric_allowed_user_ids():
    with pytest.raises(SettingsError, match="BOT_ALLOWED_USER_IDS"):
        Settings.from_env({"BOT_ALLOWED_USER_IDS": "12,abc"})


def test_startup_fails_without_token(tmp_path: Path):
    settings = Settings.from_env({"VOICE_RAG_INDEX_DIR": str(tmp_path)})
    with pytest.raises(StartupError, match="TELEGRAM_TOKEN is not set"):
        check_telegram_settings(settings.telegram)


def test_startup_fails_without_index_and_names_the_fix(tmp_path: Path):
    """Every front end's check: no token needed (that is Telegram's own)."""
    settings = Settings.from_env({"VOICE_RAG_INDEX_DIR": str(tmp_path)})
    with pytest.raises(StartupError, match=r"no index at .*python -m ragtools build-index"):
        check_startup(settings)


def test_startup_fails_for_webhook_without_secret(tmp_path: Path):
    settings = Settings.from_env({"TELEGRAM_TOKEN": "1:x", "TELEGRAM_WEBHOOK_URL": "https://x/t"})
    with pytest.raises(StartupError, match="TELEGRAM_WEBHOOK_SECRET"):
        check_telegram_settings(settings.telegram)
    for secret in ("", "has space", "x" * 257):
        with pytest.raises(StartupError, match="TELEGRAM_WEBHOOK_SECRET"):
            check_telegram_settings(replace(settings.telegram, webhook_secret=secret))
    check_telegram_settings(replace(settings.telegram, webhook_secret="s3cret-Token_1"))


def test_python_m_bot_exits_2_with_the_reason(monkeypatch, capsys, tmp_path: Path):
    monkeypatch.delenv("TELEGRAM_TOKEN", raising=False)
    monkeypatch.setenv("VOICE_RAG_INDEX_DIR", str(tmp_path))
    assert main([]) == 2
    assert "TELEGRAM_TOKEN is not set" in capsys.readouterr().err


@pytest.mark.parametrize(("variable", "value"), [
    ("BOT_MAX_VOICE_S", "2m"),  # read by rag.settings
    ("BOT_ALLOWED_USER_IDS", "12,abc"),  # checked by bot.settings
    ("VOICE_RAG_USE_GATE", "maybe"),  # the core's section
])
def test_a_malformed_setting_stops_start_up_with_one_line_naming_it(monkeypatch, capsys,
                                                                     variable, value):
    monkeypatch.setenv(variable, value)
    assert main(["--console"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {variable} must be ") and err.count("\n") == 1


def test_plain_markup_writes_text_as_is():
    text = Text((Span("Sources", "bold"), Span("\n1. "), Span("en-1-0", "code"),
                 Span(" & <x>")))
    assert PLAIN.render(text) == str(text) == "Sources\n1. en-1-0 & <x>"


async def test_download_of_a_file_without_file_path_is_a_voice_download_error():
    class Media:  # getFile answered without the optional file_path
        async def get_file(self) -> File:
            return File("FILE-1", "U1", file_size=10)

    with pytest.raises(VoiceDownloadError, match="No `file_path` available") as err:
        await download(Media())
    assert not err.value.is_too_big
