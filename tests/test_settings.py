"""Settings from the environment: every variable converts to its field's type, and a malformed
value stops start-up with one line naming the variable (exit 2) instead of a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.chat.services import Services
from bot.settings import BotSettings, Settings, TelegramSettings
from clients.openrouter import OpenRouterSettings
from clients.stt import SarvamSettings
from rag.settings import RagSettings

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # five child processes
@pytest.mark.parametrize(("command", "variable", "value", "expected"), [
    (["bot", "ask", "How much does an Xbox 360 cost?"], "VOICE_RAG_FLOOR_EN", "high",
     "must be a number"),
    (["bot", "--console"], "BOT_MAX_VOICE_S", "2m", "must be an integer"),
    (["bot", "--console"], "VOICE_RAG_USE_GATE", "maybe", "must be true or false"),
    (["bot", "ask", "How much does an Xbox 360 cost?"], "VOICE_RAG_USE_GATE", "maybe",
     "must be true or false"),
    (["bot", "ask", "How much does an Xbox 360 cost?", "--generative"],
     "OPENROUTER_MAX_TOKENS", "0", "must be at least 1"),
], ids=["ask-float", "bot-int", "bot-bool", "ask-bool", "ask-generative-int"])
def test_malformed_setting_exits_2_with_one_line_naming_the_variable(
        tmp_path, command, variable, value, expected):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "SARVAM_"))}
    env |= {"BOT_DB_PATH": str(tmp_path / "console.sqlite3"), variable: value}
    proc = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, env=env, timeout=120,
                          input="", capture_output=True, text=True)
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()  # one line, no traceback
    assert line.startswith(f"error: {variable} {expected}") and line.endswith(f"got {value!r}")


@pytest.mark.parametrize(("value", "is_on"), [("true", True), ("YES", True), ("1", True),
                                              ("false", False), ("no", False), ("0", False)])
def test_boolean_settings_accept_true_false_yes_no_1_0(value, is_on):
    assert Settings.from_env({"VOICE_RAG_USE_GATE": value}).rag.use_gate is is_on


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("BOT_PIPELINE_THREADS", "0", "must be at least 1"),
    ("VOICE_RAG_TOP_K", "0", "must be at least 1"),
    ("VOICE_RAG_FLOOR_HI", "1.5", "must be between -1 and 1"),
    ("BOT_RATE_LIMIT_WINDOW_S", "-30", "must be at least 1"),
    ("BOT_MAX_VOICE_S", "-1", "must be at least 1"),
    ("PORT", "99999", "must be between 1 and 65535"),
    ("OPENROUTER_MAX_PASSAGES", "0", "must be at least 1"),
])
def test_a_value_outside_its_bounds_is_refused_naming_the_variable(variable, value, expected):
    with pytest.raises(ValueError, match=f"^{variable} {expected}, got '{value}'$"):
        Settings.from_env({variable: value})


@pytest.mark.slow  # a child process
def test_zero_pipeline_threads_exits_2_with_one_line_instead_of_hanging(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "SARVAM_"))}
    env |= {"BOT_DB_PATH": str(tmp_path / "console.sqlite3"), "BOT_PIPELINE_THREADS": "0"}
    proc = subprocess.run([sys.executable, "-m", "bot", "--console"], cwd=ROOT, env=env,
                          timeout=120, input="", capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: BOT_PIPELINE_THREADS must be at least 1, got '0'"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_floor_that_is_not_a_finite_number_is_refused(value):
    expected = f"VOICE_RAG_FLOOR_EN must be a finite number, got '{value}'"
    with pytest.raises(ValueError, match=expected):
        RagSettings.from_env({"VOICE_RAG_FLOOR_EN": value})


def test_numbers_and_lists_convert_to_their_field_types():
    settings = Settings.from_env({"VOICE_RAG_FLOOR_HI": "0.9", "BOT_MAX_VOICE_S": "60",
                                  "BOT_ALLOWED_USER_IDS": "12, 34"})
    assert settings.rag.floor_hi == 0.9 and settings.bot.max_voice_s == 60
    assert settings.bot.allowed_user_ids == (12, 34)


async def test_services_that_fail_to_open_close_their_database(tmp_path, fake_settings,
                                                                fake_pipeline):
    before = set(threading.enumerate())
    with pytest.raises(ValueError, match="max_workers"):
        await Services.open(Settings(
            rag=fake_settings, sarvam=SarvamSettings(), openrouter=OpenRouterSettings(),
            telegram=TelegramSettings(),
            bot=BotSettings(db_path=tmp_path / "bot.sqlite3", pipeline_threads=0),
        ), fake_pipeline)
    started = [t for t in threading.enumerate() if t not in before]
    for thread in started:  # a closed database's worker returns just after close() does
        thread.join(timeout=2)
    leftover = [t for t in started if t.is_alive()]
    assert leftover == []  # the database's worker thread would keep the process alive


@pytest.mark.parametrize("variable", ["SARVAM_API_KEY", "OPENROUTER_API_KEY",
                                      "OPENROUTER_APP_TITLE", "TELEGRAM_TOKEN"])
def test_a_key_with_a_pasted_smart_quote_is_refused_without_echoing_it(variable):
    with pytest.raises(ValueError, match=f"^{variable} must be printable ASCII") as err:
        Settings.from_env({variable: "sk_abc\u201d"})
    assert "sk_abc" not in str(err.value)


async def test_services_open_the_database_that_bot_database_url_names(tmp_path, pg_url,
                                                                      fake_settings,
                                                                      fake_pipeline):
    settings = Settings.from_env({"BOT_DATABASE_URL": pg_url,
                                  "BOT_DB_PATH": str(tmp_path / "unused.sqlite3")})
    assert settings.bot.database_url == pg_url
    services = await Services.open(Settings(
        rag=fake_settings, sarvam=SarvamSettings(), openrouter=OpenRouterSettings(),
        telegram=TelegramSettings(), bot=settings.bot), fake_pipeline)
    try:
        assert services.db.dialect == "postgresql"
        assert (await services.db.set_chat_settings("telegram", 5, lang="hi")).lang == "hi"
    finally:
        await services.close()
    assert not (tmp_path / "unused.sqlite3").exists()
