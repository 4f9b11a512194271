"""The web channel in a real headless browser: Debian's ``chromium`` driven by Selenium through
``chromium-driver``, against ``python -m bot --web`` (its own process, over the shared sample's
index) and the Sarvam stand-in (``python -m standins.sarvam``, its own process).

As people use it: a Hindi question typed in the page is answered in Devanagari with Hindi
labels and badge, its sources and its "Why?"; after each answer and after a reload the cursor is
in the question box, so a question typed at once is answered; on a phone the newest answer is
in view above the form; a 5,000-character paste is said to be cut, before and after sending; a
question recorded with the microphone (Chromium's fake capture device playing espeak-ng speech)
comes back with a spoken reply; the conversation survives a restart of the bot, and two
replicas behind nginx serve one session alternately; Devanagari, Gujarati and Telugu render
from the page's own web fonts in a Chromium that has no Indic font at all. Each view is saved
as a PNG: into ``$WEB_SCREENSHOT_DIR`` when set (``docs/img`` makes the screenshots in
docs/channels.md), else a temporary folder:

    WEB_SCREENSHOT_DIR=docs/img python3 -m pytest -q tests/test_web_browser.py

Slow (a browser and child processes); skipped, saying why, only where chromium or its driver,
espeak-ng, ffmpeg, the Noto fonts or nginx are not installed (``.ci/run`` installs them, and
fails them there: ``VOICE_RAG_REQUIRE_TOOLS=1``).
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

import httpx
import pytest

from bot.chat.messages import t
from standins.replicas import ReplicaSet
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
XBOX = "How much does an Xbox 360 cost?"
DEVANAGARI = re.compile(r"[\u0900-\u097F]")
INDIC = re.compile(r"[\u0900-\u097F\u0A80-\u0AFF\u0C00-\u0C7F\u200C\u200D]")
SARVAM_KEY = "web-browser-test-key"
RATE_LIMIT_N = 5
"""``BOT_RATE_LIMIT_N``'s default (bot.settings.BotSettings.rate_limit_n)."""
RATE_WINDOW_S = 3600
LATIN_FONTS = Path("/usr/share/fonts/truetype/dejavu")
"""The one font folder the no-Indic-font Chromium sees (DejaVu: Latin, Greek, Cyrillic; no
Devanagari, Gujarati or Telugu)."""


def _start(args: list[str], env: dict[str, str], log_path: Path, pattern: str,
           timeout_s: float = 180.0) -> tuple[subprocess.Popen, str]:
    """Start ``python <args>``; wait for the stdout line matching ``pattern`` (one group: the
    base URL); stderr goes to ``log_path`` (appended: a restart keeps the first run's)."""
    log = log_path.open("a")
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


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(30)


def bot_env(index_dir: Path, db_path: Path, sarvam_url: str | None = None) -> dict[str, str]:
    """``python -m bot --web``'s environment: the sample index, its own SQLite file, speech
    through the stand-in when given, the default rate limit over a long window."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "SARVAM_"))}
    env |= {"VOICE_RAG_INDEX_DIR": str(index_dir), "BOT_DB_PATH": str(db_path),
            "BOT_WEB_PORT": "0",
            # the default limit (5 messages), over a window no slow machine outlasts while the
            # flood test types its 50 messages (the default window is 30 s)
            "BOT_RATE_LIMIT_WINDOW_S": str(RATE_WINDOW_S)}
    if sarvam_url:
        env |= {"SARVAM_API_KEY": SARVAM_KEY, "SARVAM_BASE_URL": sarvam_url}
    return env


def start_bot(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    return _start(["-m", "bot", "--web"], env, log_path, r"^web: (http://127\.0\.0\.1:\d+)/ ")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("web-browser")


@pytest.fixture(scope="module")
def web_url(sample_index_dir, work) -> Iterator[str]:
    """``python -m bot --web`` on a free port, speech through the Sarvam stand-in; its URL."""
    transcripts = work / "transcripts.json"
    transcripts.write_text(json.dumps({"default": {"transcript": CUCUMBER_HI,
                                                   "language_code": "hi-IN"}}), "utf-8")
    sarvam, sarvam_url = _start(
        ["-m", "standins.sarvam", "--port", "0", "--api-key", SARVAM_KEY, "--transcripts",
         str(transcripts)], dict(os.environ), work / "sarvam.log", r"base_url=(\S+)")
    try:
        bot, url = start_bot(bot_env(sample_index_dir, work / "bot.db", sarvam_url),
                             work / "bot.log")
        try:
            yield url
        finally:
            _stop(bot)
    finally:
        _stop(sarvam)


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


def viewport_shot(driver, folder: Path, name: str) -> Path:
    """What the window shows now (not the whole page) as ``web-<name>.png``."""
    path = folder / f"web-{name}.png"
    assert driver.save_screenshot(str(path))
    return path


def wait_for(condition, timeout_s: float = 60.0):
    """:func:`tests.browser.wait_for` with the web's longer default (an answer, not a click)."""
    return wait_until(condition, timeout_s, step_s=0.1)


def articles(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#conversation article")


def mark_page(driver) -> None:
    """Mark the page now shown, so :func:`wait_new_page` can tell when the next one loads."""
    driver.execute_script("window.beforeThisMessage = true;")


def wait_new_page(driver, timeout_s: float = 90.0) -> None:
    """Until the page marked by :func:`mark_page` was replaced (a form POST, then the page
    again) and the new one finished loading."""
    wait_for(lambda: driver.execute_script(
        "return window.beforeThisMessage === undefined "
        "&& document.readyState === 'complete';"), timeout_s)


def type_at_cursor(driver, text: str) -> None:
    """Type ``text`` and Enter wherever the cursor is, as a person does after a page loads:
    no click first."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    mark_page(driver)
    ActionChains(driver).send_keys(text + Keys.ENTER).perform()
    wait_new_page(driver)


def box_has_focus(driver) -> bool:
    return driver.execute_script("return document.activeElement.id === 'question';")


def reply_text_of(article) -> str:
    from selenium.webdriver.common.by import By

    return article.find_element(By.CSS_SELECTOR, ".reply").text


def test_a_hindi_question_typed_in_the_page_is_answered_with_hindi_labels_and_badge(
        web_url, browser, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    assert browser.find_element(By.CSS_SELECTOR, "label[for=question]").text == \
        "Your question"  # the browser's language (en-US) before any reply
    assert box_has_focus(browser)  # type at once, by keyboard
    type_at_cursor(browser, CUCUMBER_HI)  # Enter sends (Shift+Enter: a new line)
    [article] = articles(browser)
    assert article.get_attribute("lang") == "hi"
    kind = article.get_attribute("data-kind")
    assert kind in ("confident", "hedged")
    badge = article.find_element(By.CSS_SELECTOR, ".badge")
    assert badge.text == t(f"web_kind_{kind}", "hi")
    assert t("web_you_asked", "hi") in article.find_element(By.CSS_SELECTOR, ".question").text
    reply = reply_text_of(article)
    assert len(DEVANAGARI.findall(reply)) > 40 and re.search(r"\[1\]$", reply), reply
    sources = article.find_element(By.CSS_SELECTOR, ".sources")
    assert sources.find_element(By.TAG_NAME, "h3").text == "स्रोत"
    assert re.search(r"हिंदी में अंश: .+ hi-\d+-\d+ · मिलान 0\.\d{3}", sources.text, re.S), \
        sources.text
    # the page's own words turned Hindi with the reply
    assert browser.find_element(By.CSS_SELECTOR, "label[for=question]").text == "आपका सवाल"
    assert browser.find_element(By.ID, "send").text == "पूछें"
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "hi"
    why = article.find_element(By.CSS_SELECTOR, "details.why")
    summary_line = why.find_element(By.CSS_SELECTOR, ".why-summary")
    assert not summary_line.is_displayed()
    why.find_element(By.TAG_NAME, "summary").send_keys(Keys.ENTER)  # opened from the keyboard
    assert summary_line.is_displayed()
    assert summary_line.text.startswith("जवाब दिया"), summary_line.text  # plain words first
    steps = why.find_element(By.CSS_SELECTOR, "table.chain").text
    for stage in ("search", "relevance_guard", "answerability_gate"):
        assert stage in steps, steps
    answered = reply
    screenshot(browser, shots, "hindi")

    browser.refresh()  # a reload keeps the conversation (same cookie)
    [kept] = wait_for(lambda: articles(browser))
    assert reply_text_of(kept) == answered
    assert CUCUMBER_HI in kept.find_element(By.CSS_SELECTOR, ".question").text


def test_after_an_answer_and_a_reload_the_cursor_is_in_the_box_and_a_question_typed_at_once_is_answered(  # noqa: E501
        web_url, browser, shots):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    type_at_cursor(browser, XBOX)
    assert len(articles(browser)) == 1 and box_has_focus(browser)  # after the answer
    type_at_cursor(browser, "/help")  # typed straight away after the answer
    assert "/why" in reply_text_of(articles(browser)[-1])
    browser.refresh()
    wait_for(lambda: len(articles(browser)) == 2)
    assert box_has_focus(browser)  # after a reload
    type_at_cursor(browser, "Who is the Prime Minister of India?")  # typed at once
    [*_, refused] = articles(browser)
    assert refused.get_attribute("data-kind") == "refused"
    assert "floor" in reply_text_of(refused)  # the refusal says why, with the numbers
    assert box_has_focus(browser)
    assert browser.find_element(By.ID, "question").get_attribute("value") == ""
    viewport_shot(browser, shots, "focus")
    # no card's "Why?" or source stands between the box and its button
    ActionChains(browser).send_keys(Keys.TAB).perform()
    assert browser.execute_script("return document.activeElement.id") == "send"


def newest_in_view(driver) -> dict:
    """Where the newest exchange and the form are in the viewport (CSS pixels)."""
    return driver.execute_script(
        "const last = document.querySelector('#conversation article:last-of-type');"
        "const a = last.getBoundingClientRect();"
        "const f = document.getElementById('ask').getBoundingClientRect();"
        "return {top: a.top, bottom: a.bottom, form_top: f.top, height: innerHeight};")


def test_on_a_phone_the_newest_answer_is_in_view_above_the_form_after_a_reload(
        web_url, browser, shots):
    browser.delete_all_cookies()
    browser.get(web_url + "/")
    for question in (XBOX, "/help", "canceled check definition"):
        type_at_cursor(browser, question)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 1, "mobile": True})
    try:
        browser.refresh()
        wait_for(lambda: len(articles(browser)) == 3)
        wait_for(lambda: browser.execute_script("return document.readyState") == "complete")
        time.sleep(0.3)  # the load handler's second look, after fonts and layout settle
        seen = newest_in_view(browser)
        assert seen["height"] == PHONE[1]
        # not under the sticky form: its end above the form, or its start at the top when it
        # is taller than the room left
        room = seen["form_top"]
        if seen["bottom"] - seen["top"] <= room:
            assert 0 <= seen["top"] and seen["bottom"] <= seen["form_top"] + 1, seen
        else:
            assert abs(seen["top"]) <= 1, seen
        assert box_has_focus(browser)
        viewport_shot(browser, shots, "phone")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_a_5000_character_paste_is_said_to_be_cut_beside_the_form_and_in_the_reply(
        web_url, browser, shots):
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    question = (XBOX + " " + "Please tell me the price of the console in dollars. " * 100)
    question = question[:4999] + "?"
    box = browser.find_element(By.ID, "question")
    browser.execute_script(  # a paste: the value at once, then the input event
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", box, question)
    assert len(box.get_attribute("value")) == 5000  # nothing cut silently by the browser
    notice = browser.find_element(By.ID, "notice")
    assert notice.text == "5,000 characters: only the first 1,000 will be read."
    assert notice.find_element(By.XPATH, "ancestor::form").get_attribute("id") == "ask"
    assert browser.execute_script(  # in view, where the person is typing
        "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && "
        "r.bottom <= innerHeight;", notice)
    viewport_shot(browser, shots, "cut-notice")
    mark_page(browser)
    box.submit()
    wait_new_page(browser)
    [article] = articles(browser)
    reply = reply_text_of(article)
    assert re.match(r"Your question was 5,000 characters long, over the limit of 1,000: I read "
                    r"only its first \d{3} characters\.", reply), reply
    screenshot(browser, shots, "cut")


def test_a_question_recorded_with_the_microphone_gets_a_spoken_reply(web_url, browser, shots):
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(web_url + "/")
    record = browser.find_element(By.ID, "record")
    assert record.is_displayed() and record.get_attribute("aria-pressed") == "false"
    hint = browser.find_element(By.ID, "record-hint").text
    assert "microphone" in hint and "phone" not in hint.replace("microphone", "")
    record.click()
    wait_for(lambda: record.get_attribute("aria-pressed") == "true", 10)
    time.sleep(4.5)  # the fake microphone plays the question (about 2.5 s) in a loop
    record.click()
    [article] = wait_for(lambda: articles(browser), 90)
    question = article.find_element(By.CSS_SELECTOR, ".question").text
    assert question == f"{t('web_your_voice', 'hi')}\n{CUCUMBER_HI}", question  # as heard
    assert DEVANAGARI.search(reply_text_of(article))
    chain = article.find_element(By.CSS_SELECTOR, "table.chain").get_attribute("textContent")
    for stage in ("transcode", "speech_gate", "speech_to_text", "text_to_speech"):
        assert stage in chain, chain
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
    browser.delete_all_cookies()
    browser.get(web_url + "/")
    kinds = []
    for i in range(50):
        type_at_cursor(browser, "/help")  # the cursor is back in the box after each
        text = articles(browser)[-1].text
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


def test_a_restart_of_the_bot_keeps_the_conversation(sample_index_dir, work, shots):
    """The conversation is in the database: the bot stopped and started again (a new process,
    a new port; the browser's cookie is the same) shows the whole of it."""
    from selenium.webdriver.common.by import By

    env = bot_env(sample_index_dir, work / "restart.db")
    with chromium() as driver:
        bot, url = start_bot(env, work / "restart.log")
        try:
            driver.get(url + "/")
            type_at_cursor(driver, CUCUMBER_HI)
            type_at_cursor(driver, XBOX)
            before = [a.text for a in articles(driver)]
        finally:
            _stop(bot)
        bot, url = start_bot(env, work / "restart.log")
        try:
            driver.get(url + "/")
            after = [a.text for a in articles(driver)]
            assert after == before and len(after) == 2
            assert box_has_focus(driver)
            type_at_cursor(driver, "/why")  # and it goes on where it was
            assert "Xbox" in reply_text_of(articles(driver)[-1])
            assert driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"
            screenshot(driver, shots, "restart")
        finally:
            _stop(bot)


def fonts_drawing(driver, selector: str) -> dict[str, int]:
    """The fonts Chromium drew the text of the element at ``selector`` with, as the DevTools
    protocol reports them (``CSS.getPlatformFontsForNode``): family name -> glyphs drawn, a
    served web font's name followed by " (web)"."""
    driver.execute_cdp_cmd("DOM.enable", {})
    driver.execute_cdp_cmd("CSS.enable", {})
    root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = driver.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": selector})
    assert node["nodeId"], selector
    fonts = driver.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})
    return {f["familyName"] + (" (web)" if f["isCustomFont"] else ""): f["glyphCount"]
            for f in fonts["fonts"]}


@needs_tools("fonts-noto-core", "fonts-dejavu-core")
def test_the_page_renders_the_three_scripts_in_a_browser_without_indic_fonts(
        web_url, tmp_path, shots):
    """Chromium's fontconfig is pointed at DejaVu alone: the system has no Devanagari, Gujarati
    or Telugu font, and its missing-glyph boxes all have one width. The page's own text in the
    three scripts (a Hindi answer, the Gujarati and Telugu replies to /lang) is drawn with the
    web fonts it serves: in each of its elements, at the weights the page uses (labels and
    questions at 600 were boxes until the web fonts came first in the stack), the characters
    have many widths; the same elements in the system's fonts alone have one."""
    from selenium.webdriver.common.by import By

    conf = tmp_path / "fonts.conf"
    conf.write_text(f"""<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>{LATIN_FONTS}</dir><cachedir>{tmp_path / "fc-cache"}</cachedir></fontconfig>
""")
    env = {**os.environ, "FONTCONFIG_FILE": str(conf), "FONTCONFIG_PATH": str(tmp_path)}
    with chromium(env=env) as driver:
        driver.get(web_url + "/")
        for question in (CUCUMBER_HI, "/lang gu", "/lang te"):
            type_at_cursor(driver, question)
        driver.execute_async_script("const done = arguments[0]; document.fonts.ready.then("
                                    "() => done(true));")
        loaded = driver.execute_script(
            "return Array.from(document.fonts).filter((f) => f.status === 'loaded')"
            ".map((f) => f.family.replace(/\"/g, ''));")
        for script in ("Devanagari", "Gujarati", "Telugu"):
            assert f"VR Noto Sans {script}" in loaded, loaded
        hindi, gujarati, telugu = (f"#conversation article:nth-of-type({n})" for n in (1, 2, 3))
        drawn = {  # the page's own elements, at the weights it uses them
            f"{hindi} .question span[lang]": "Devanagari",  # 600
            f"{hindi} .badge": "Devanagari",  # 600
            f"{hindi} .sources h3": "Devanagari",  # bold
            f"{hindi} .reply": "Devanagari",
            f"{gujarati} .reply": "Gujarati",
            f"{telugu} .reply": "Telugu",
            "label[for=question]": "Telugu",  # 600
            "#send": "Telugu",
        }
        for selector, script in drawn.items():
            fonts = fonts_drawing(driver, selector)
            web_font = f"Noto Sans {script} (web)"
            text = driver.execute_script("return document.querySelector(arguments[0])"
                                         ".textContent;", selector)
            n_other = sum(not INDIC.match(ch) for ch in text)  # spaces, digits, Latin
            assert fonts.get(web_font, 0) > 0, (selector, fonts)
            # DejaVu draws what is not Indic, at most; boxes for Indic letters would be more
            assert sum(n for font, n in fonts.items() if font != web_font) <= n_other, \
                (selector, fonts, n_other)
        # the control: this browser has no Indic font but the page's; the system's fonts
        # alone draw the same text with DejaVu's empty boxes
        driver.execute_script("document.querySelector(arguments[0]).style.fontFamily = "
                              "'sans-serif';", f"{hindi} .reply")
        assert not any("Devanagari" in font for font in fonts_drawing(driver, f"{hindi} .reply"))
        driver.execute_script("document.querySelector(arguments[0]).style.fontFamily = '';",
                              f"{hindi} .reply")
        assert driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "te"
        screenshot(driver, shots, "no-system-fonts")


@needs_tools("nginx")
async def test_two_replicas_behind_nginx_serve_one_session_alternately_with_the_whole_conversation(  # noqa: E501
        sample_index_dir, pg_url, tmp_path, shots):
    """No sticky sessions: nginx sends the session's requests to the two web replicas in turn
    (round robin, read back from its access log), and every page, whichever replica renders
    it, shows every exchange, whichever replica answered it."""
    env = {"VOICE_RAG_INDEX_DIR": str(sample_index_dir), "BOT_RATE_LIMIT_N": "0",
           "BOT_REPEAT_WINDOW_S": "0"}
    async with ReplicaSet(n_telegram=0, n_web=2, database_url=pg_url, env=env,
                          work_dir=tmp_path / "rs", balance="round_robin",
                          inherit_bot_env=False) as replicas:
        with chromium() as driver:
            driver.get(replicas.url + "/")
            seen = []
            for question in (XBOX, CUCUMBER_HI, "/help"):
                type_at_cursor(driver, question)
                seen.append([a.text for a in articles(driver)])
            for _ in range(4):
                driver.refresh()
                wait_for(lambda: len(articles(driver)) == 3)
                seen.append([a.text for a in articles(driver)])
            assert [len(page) for page in seen] == [1, 2, 3, 3, 3, 3, 3]
            assert all(page == seen[-1] for page in seen[2:])  # the same whole conversation
            screenshot(driver, shots, "replicas")
        access = (replicas.nginx_dir / "logs" / "access.log").read_text()
        pages = re.findall(r'"GET / HTTP/1\.1" 200 \d+ upstream=127\.0\.0\.1:(\d+)', access)
        ports = {str(r.port) for r in replicas.web}
        assert len(pages) == 1 + len(seen), access  # the empty page, then one per load
        pages = pages[1:]
        assert set(pages[-4:]) == ports, pages  # the reloads went to both, in turn
        # a question posted to one replica, its page served by the other
        served = re.findall(r'"(POST /ask|GET /) HTTP/1\.1" \d+ \d+ upstream=127\.0\.0\.1:(\d+)',
                            access)
        hops = [(port, served[n + 1][1]) for n, (request, port) in enumerate(served)
                if request == "POST /ask"]  # the page after each question
        assert len(hops) == 3 and any(posted != shown for posted, shown in hops), hops
        for port in ports:  # each replica showed the whole conversation once there was one
            assert all(page == seen[-1] for page, served in zip(seen[2:], pages[2:],
                                                                strict=True) if served == port)


def test_the_voice_demo_answers_a_recording_without_a_sarvam_account(sample_index_dir, work,
                                                                     browser, shots):
    """``python -m bot --web --demo-voice`` with no ``SARVAM_*`` at all: the page says its
    transcripts are scripted, and a recording is answered (the stand-in's transcript) with a
    spoken reply."""
    from selenium.webdriver.common.by import By

    from bot.web.demo import DEMO_TRANSCRIPT

    env = bot_env(sample_index_dir, work / "demo.db")
    assert not any(name.startswith("SARVAM_") for name in env)
    bot, url = _start(["-m", "bot", "--web", "--demo-voice", "--port", "0"], env,
                      work / "demo.log", r"^web: (http://127\.0\.0\.1:\d+)/ \(auth none "
                      r"\(loopback\); voice demo")
    try:
        browser.delete_all_cookies()
        browser.get(url + "/")
        demo = browser.find_element(By.ID, "demo").text
        assert "transcripts are scripted" in demo and DEMO_TRANSCRIPT in demo
        record = browser.find_element(By.ID, "record")
        record.click()
        wait_for(lambda: record.get_attribute("aria-pressed") == "true", 10)
        time.sleep(2)
        record.click()
        [article] = wait_for(lambda: articles(browser), 90)
        assert DEMO_TRANSCRIPT in article.find_element(By.CSS_SELECTOR, ".question").text
        assert article.get_attribute("data-kind") in ("confident", "hedged")
        assert article.find_element(By.CSS_SELECTOR, "audio").get_attribute("src").endswith(
            article.get_attribute("id").removeprefix("m-"))
        screenshot(browser, shots, "demo-voice")
    finally:
        _stop(bot)
    standin = re.search(r"stand-in at (http://127\.0\.0\.1:\d+)", demo_line(work)).group(1)
    with pytest.raises(httpx.ConnectError):  # it stopped with the bot
        httpx.get(standin + "/speech-to-text", timeout=5)


def demo_line(work: Path) -> str:
    """The demo bot's ``web_listening`` log line."""
    return next(line for line in (work / "demo.log").read_text().splitlines()
                if "web_listening" in line)
