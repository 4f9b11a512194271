"""The web channel in a real headless browser: Debian's ``chromium`` driven by Selenium through
``chromium-driver``, against ``python -m bot --web`` (its own process, over the shared sample's
index) and the Sarvam stand-in (``python -m standins.sarvam``, its own process).

A Hindi question typed in the page is answered in Devanagari with its sources and its
decision chain, and a reload keeps the conversation; a question recorded with the microphone
(Chromium's fake capture device playing espeak-ng speech from a WAV file) goes through
MediaRecorder, the upload and the voice path, and comes back with a spoken reply the page's
player can load. Each view is saved as a PNG: into ``$WEB_SCREENSHOT_DIR`` when set
(``docs/img`` makes the screenshots in docs/channels.md), else a temporary folder:

    WEB_SCREENSHOT_DIR=docs/img python3 -m pytest -q tests/test_web_browser.py

Slow (a browser and two child processes); skipped, saying why, only where chromium or its
driver, espeak-ng or ffmpeg is not installed (``.ci/run`` installs them, and fails them there:
``VOICE_RAG_REQUIRE_TOOLS=1``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from standins.voice_notes import speak_wav
from tests.browser import DESKTOP, PHONE, chromium, needs_chromium, screenshot_folder
from tests.browser import screenshot as browser_shot
from tests.browser import wait_for as wait_until
from tests.conftest import ROOT, needs_tools

pytestmark = [
    pytest.mark.slow,
    needs_chromium,
    needs_tools("espeak-ng", "ffmpeg"),
]
CUCUMBER_HI = "छोटे खीरे में कैलोरी की मात्रा"
DEVANAGARI = re.compile(r"[\u0900-\u097F]")
CITATION_HI = re.compile(r"1\. hi-\d+-\d+ · हिंदी · स्कोर 0\.\d{3}")
SARVAM_KEY = "web-browser-test-key"
RATE_LIMIT_N = 5
"""``BOT_RATE_LIMIT_N``'s default (bot.settings.BotSettings.rate_limit_n)."""
RATE_WINDOW_S = 3600


def _start(args: list[str], env: dict[str, str], log_path: Path, pattern: str,
           timeout_s: float = 180.0) -> tuple[subprocess.Popen, str]:
    """Start ``python <args>``; wait for the stdout line matching ``pattern`` (one group: the
    base URL); stderr goes to ``log_path``."""
    log = log_path.open("w")
    process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        if match := re.search(pattern, line):
            return process, match.group(1)
    process.kill()
    raise AssertionError(f"{args} did not start (exit {process.poll()}): "
                         f"{log_path.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def web_url(sample_index_dir, tmp_path_factory) -> Iterator[str]:
    """``python -m bot --web`` on a free port, speech through the Sarvam stand-in; its URL."""
    work = tmp_path_factory.mktemp("web-browser")
    transcripts = work / "transcripts.json"
    transcripts.write_text(json.dumps({"default": {"transcript": CUCUMBER_HI,
                                                   "language_code": "hi-IN"}}), "utf-8")
    sarvam, sarvam_url = _start(
        ["-m", "standins.sarvam", "--port", "0", "--api-key", SARVAM_KEY, "--transcripts",
         str(transcripts)], dict(os.environ), work / "sarvam.log", r"base_url=(\S+)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "SARVAM_"))}
    env |= {"VOICE_RAG_INDEX_DIR": str(sample_index_dir), "BOT_DB_PATH": str(work / "bot.db"),
            "BOT_WEB_PORT": "0", "SARVAM_API_KEY": SARVAM_KEY, "SARVAM_BASE_URL": sarvam_url,
            # the default limit (5 messages), over a window no slow machine outlasts while the
            # flood test types its 50 messages (the default window is 30 s)
            "BOT_RATE_LIMIT_WINDOW_S": str(RATE_WINDOW_S)}
    try:
        bot, url = _start(["-m", "bot", "--web"], env, work / "bot.log",
                          r"^web: (http://127\.0\.0\.1:\d+)/ ")
        try:
            yield url
        finally:
            bot.terminate()
            bot.wait(20)
    finally:
        sarvam.terminate()
        sarvam.wait(10)


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory) -> Path:
    """The question spoken by espeak-ng, as the fake microphone's WAV (played in a loop)."""
    path = tmp_path_factory.mktemp("microphone") / "question.wav"
    path.write_bytes(speak_wav(CUCUMBER_HI, "hi"))
    return path


@pytest.fixture(scope="module")
def browser(speech_wav):
    with chromium(("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                   f"--use-file-for-fake-audio-capture={speech_wav}",
                   "--autoplay-policy=no-user-gesture-required")) as driver:
        yield driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return screenshot_folder("WEB_SCREENSHOT_DIR", tmp_path_factory)


def screenshot(driver, folder: Path, name: str, size: tuple[int, int] = DESKTOP) -> Path:
    """The whole page as ``web-<name>.png``."""
    return browser_shot(driver, folder / f"web-{name}.png", size)


def wait_for(condition, timeout_s: float = 60.0):
    """:func:`tests.browser.wait_for` with the web's longer default (an answer, not a click)."""
    return wait_until(condition, timeout_s, step_s=0.1)


def articles(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#conversation article")


def test_a_typed_hindi_question_is_answered_in_devanagari_with_its_chain_and_kept_on_reload(
        web_url, browser, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    label = browser.find_element(By.CSS_SELECTOR, "label[for=question]")
    assert label.text == "Your question"
    box = browser.find_element(By.ID, "question")
    assert browser.switch_to.active_element == box  # focused: type at once, by keyboard
    box.send_keys(CUCUMBER_HI + Keys.ENTER)  # Enter sends (Shift+Enter: a new line)
    [article] = wait_for(lambda: articles(browser))
    reply = article.find_element(By.CSS_SELECTOR, ".reply")
    assert reply.get_attribute("lang") == "hi"
    assert len(DEVANAGARI.findall(reply.text)) > 40, reply.text
    assert "स्रोत" in reply.text and CITATION_HI.search(reply.text), reply.text
    assert article.get_attribute("data-kind") in ("confident", "hedged")
    assert CUCUMBER_HI in article.find_element(By.CSS_SELECTOR, ".question").text
    chain = article.find_element(By.CSS_SELECTOR, ".chain")
    assert not chain.is_displayed()
    summary = article.find_element(By.CSS_SELECTOR, "details.why summary")
    summary.send_keys(Keys.ENTER)  # the web's /why, opened from the keyboard
    assert chain.is_displayed()
    for stage in ("search", "relevance_guard"):
        assert f"{stage} — " in chain.text, chain.text
    assert DEVANAGARI.search(chain.text)  # the header in the question's language
    answered = reply.text
    screenshot(browser, shots, "hindi")

    browser.refresh()  # a reload keeps the conversation (same cookie)
    [kept] = wait_for(lambda: articles(browser))
    assert reply_text_of(kept) == answered
    assert CUCUMBER_HI in kept.find_element(By.CSS_SELECTOR, ".question").text
    screenshot(browser, shots, "phone", PHONE)


def reply_text_of(article) -> str:
    from selenium.webdriver.common.by import By

    return article.find_element(By.CSS_SELECTOR, ".reply").text


def test_a_question_recorded_with_the_microphone_gets_a_spoken_reply(web_url, browser, shots):
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    record = browser.find_element(By.ID, "record")
    assert record.is_displayed() and record.get_attribute("aria-pressed") == "false"
    record.click()
    wait_for(lambda: record.get_attribute("aria-pressed") == "true", 10)
    time.sleep(4.5)  # the fake microphone plays the question (about 2.5 s) in a loop
    record.click()
    [article] = wait_for(lambda: articles(browser), 90)
    assert "Your voice note" in article.find_element(By.CSS_SELECTOR, ".question").text
    reply = reply_text_of(article)
    assert reply.startswith(f"आपने कहा: {CUCUMBER_HI}"), reply
    assert CITATION_HI.search(reply), reply
    chain = article.find_element(By.CSS_SELECTOR, ".chain").get_attribute("textContent")
    for stage in ("transcode", "speech_gate", "speech_to_text", "text_to_speech"):
        assert f"{stage} — " in chain, chain
    player = article.find_element(By.CSS_SELECTOR, "audio")
    played = browser.execute_async_script(  # play it through, muted: Chromium decodes it
        "const [audio, done] = arguments; audio.muted = true;"
        "audio.addEventListener('ended', () => done(['ended', audio.currentTime]));"
        "audio.addEventListener('error', () => done(['error', audio.error.code]));"
        "audio.play().catch((e) => done(['refused', String(e)]));", player)
    assert played[0] == "ended" and played[1] > 0.5, played  # seconds of the spoken reply
    screenshot(browser, shots, "voice")


def test_fifty_messages_from_one_session_get_the_rate_limits_replies(web_url, browser, shots):
    """A stranger typing fast cannot flood it: of 50 messages from one session, the first
    ``BOT_RATE_LIMIT_N`` are answered, the next gets "please wait", the rest are shown as
    not answered (and logged), and the page keeps working."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    kinds = []
    for i in range(50):
        browser.execute_script("window.beforeThisMessage = true;")
        browser.find_element(By.ID, "question").send_keys("/help" + Keys.ENTER)
        wait_for(lambda: browser.execute_script(  # a form POST, then the page again: a new load
            "return window.beforeThisMessage === undefined "
            "&& document.readyState === 'complete';"), 30)
        last = articles(browser)[-1]
        text = last.text
        if "Too many messages: please wait" in text:
            kinds.append("wait")
        elif "No reply: too many messages" in text:
            kinds.append("dropped")
        elif "/why" in text:
            kinds.append("help")
        else:
            kinds.append(f"other {i}: {text[:200]}")
        if i == RATE_LIMIT_N + 1:  # the notice, then the first message left unanswered
            screenshot(browser, shots, "rate-limit")
    assert kinds == ["help"] * RATE_LIMIT_N + ["wait"] + ["dropped"] * (49 - RATE_LIMIT_N), kinds
