"""The dashboard in a real headless browser: Debian's ``chromium`` driven by Selenium through
``chromium-driver``, against ``python -m bot dashboard`` (its own process) over a decision log
filled by real bot runs (tests/dashboard_runs.py). The list, a filter, a decision's chain, the
CSV export (downloaded by the browser), the other pages, and the list on a phone-sized window.

Each view is saved as a PNG: into ``$DASHBOARD_SCREENSHOT_DIR`` when set (``docs/img`` makes the
screenshots in docs/channels.md), else a temporary folder:

    DASHBOARD_SCREENSHOT_DIR=docs/img python3 -m pytest -q tests/test_dashboard_browser.py

Slow (a browser and a child process); skipped, saying why, only where chromium or its driver is
not installed (``.ci/run`` installs both, and fails them there: ``VOICE_RAG_REQUIRE_TOOLS=1``).
"""

from __future__ import annotations

import asyncio
import csv
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import DESKTOP, PHONE, chromium, needs_chromium, screenshot_folder, wait_for
from tests.browser import screenshot as browser_shot
from tests.conftest import ROOT, needs_tools
from tests.dashboard_runs import PM, SCRIPT, fill_by_bot_runs

pytestmark = [
    pytest.mark.slow,
    needs_chromium,
    needs_tools("espeak-ng", "ffmpeg"),
]


@pytest.fixture(scope="module")
def bot_db(tmp_path_factory, fake_settings, fake_pipeline) -> Path:
    db_path = tmp_path_factory.mktemp("dashboard-browser") / "bot.sqlite3"
    asyncio.run(fill_by_bot_runs(fake_settings, fake_pipeline, db_path))
    return db_path


@pytest.fixture(scope="module")
def dashboard(bot_db, fake_index_dir) -> Iterator[str]:
    """``python -m bot dashboard --port 0`` on the bots' log; yields its base URL."""
    env = {**os.environ, "BOT_DASHBOARD_INDEX_DIR": str(fake_index_dir)}
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "dashboard", "--port", "0", "--db", str(bot_db)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()  # "dashboard: http://127.0.0.1:PORT/ (database ...)"
        match = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/ ", line)
        assert match, f"python -m bot dashboard printed {line!r} (exit {process.poll()})"
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    with chromium(prefs={"download.default_directory": str(downloads),
                         "download.prompt_for_download": False}) as driver:
        yield driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return screenshot_folder("DASHBOARD_SCREENSHOT_DIR", tmp_path_factory)


def screenshot(driver, folder: Path, name: str, size: tuple[int, int] = DESKTOP) -> Path:
    """The whole page as ``dashboard-<name>.png``."""
    return browser_shot(driver, folder / f"dashboard-{name}.png", size)


def rows(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#questions tbody tr[data-id]")


def test_list_shows_every_question_of_the_bot_runs(browser, dashboard, shots):
    from selenium.webdriver.common.by import By

    browser.set_window_size(*DESKTOP)
    browser.get(dashboard + "/")
    assert browser.title == "Questions · VOICE-RAG dashboard"
    listed = rows(browser)
    assert [r.get_attribute("data-channel") for r in listed] == [
        channel for channel, *_ in reversed(SCRIPT)]
    first = listed[-1].find_elements(By.TAG_NAME, "td")
    assert first[1].text == "telegram" and first[5].text == "answered"
    assert re.fullmatch(r"0\.\d{3} ≥ 0\.250", first[6].text)
    refused = listed[-2].find_elements(By.TAG_NAME, "td")
    assert PM in refused[7].text and "below_floor" in refused[7].text
    screenshot(browser, shots, "questions")


def test_filter_by_status_and_channel(browser, dashboard, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(*DESKTOP)
    browser.get(dashboard + "/")
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("refused-no-match")
    browser.find_element(By.ID, "apply").click()
    wait_for(lambda: "status=refused-no-match" in browser.current_url)
    refused = rows(browser)
    assert len(refused) == 3
    assert {r.get_attribute("data-status") for r in refused} == {"refused-no-match"}
    assert "(3 matching)" in browser.find_element(By.TAG_NAME, "h1").text
    screenshot(browser, shots, "filtered")

    Select(browser.find_element(By.ID, "filter-channel")).select_by_value("whatsapp")
    browser.find_element(By.ID, "apply").click()
    wait_for(lambda: "channel=whatsapp" in browser.current_url)
    [whatsapp] = rows(browser)
    assert whatsapp.get_attribute("data-channel") == "whatsapp"


def test_a_decisions_chain_with_milliseconds_and_citations(browser, dashboard, bot_db, shots):
    from selenium.webdriver.common.by import By

    with sqlite3.connect(bot_db) as conn:
        [(voice_id,)] = conn.execute("SELECT id FROM decisions WHERE source = 'voice' AND "
                                     "status = 'answered'").fetchall()
    browser.set_window_size(*DESKTOP)
    browser.get(dashboard + "/?source=voice")
    row = next(r for r in rows(browser) if r.get_attribute("data-id") == str(voice_id))
    row.find_element(By.CSS_SELECTOR, "a.q").click()
    wait_for(lambda: browser.current_url.endswith(f"/decision/{voice_id}"))
    stages = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
              for tr in browser.find_elements(By.CSS_SELECTOR, "#chain tbody tr")]
    names = [s[1] for s in stages]
    assert names[:4] == ["voice_checks", "download", "transcode", "speech_gate"]
    assert {"speech_to_text", "relevance_guard", "grounding_guard", "text_to_speech"} <= set(names)
    assert all(re.fullmatch(r"\d+\.\d", s[4]) for s in stages)
    tts = stages[names.index("text_to_speech")]
    assert tts[2] == "failed" and tts[3].startswith("server_error")
    citations = browser.find_elements(By.CSS_SELECTOR, "#citations li")
    assert citations and re.match(r"en-\d+-\d+ en · score 0\.\d{3}", citations[0].text)
    screenshot(browser, shots, "decision")


def test_refused_questions_export_downloads_as_csv(browser, dashboard, downloads, shots):
    from selenium.webdriver.common.by import By

    browser.set_window_size(*DESKTOP)
    browser.get(dashboard + "/refusals")
    table = browser.find_element(By.ID, "refusals").text
    assert "below_floor en 3" in table
    screenshot(browser, shots, "refusals")
    browser.find_element(By.ID, "export").click()
    path = wait_for(lambda: next(iter(downloads.glob("refused-questions*.csv")), None))
    wait_for(lambda: path.stat().st_size > 0 and not list(downloads.glob("*.crdownload")))
    with path.open(encoding="utf-8", newline="") as fh:
        exported = list(csv.DictReader(fh))
    below = [r for r in exported if r["reason"] == "below_floor"]
    assert len(exported) == 6 and [r["channel"] for r in below] == [
        "whatsapp", "console", "telegram"]
    assert all(r["question"] == PM and r["best_passage_id"].startswith("en-")
               and float(r["best_score"]) < float(r["floor"]) and r["best_passage_text"]
               for r in below)


def test_scores_and_latency_pages(browser, dashboard, shots):
    from selenium.webdriver.common.by import By

    browser.set_window_size(*DESKTOP)
    browser.get(dashboard + "/scores")
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 4 and all(c.is_displayed() and c.size["height"] > 100 for c in charts)
    assert all("floor 0.250" in c.text for c in charts)
    screenshot(browser, shots, "scores")
    browser.get(dashboard + "/latency")
    latency = browser.find_element(By.ID, "latency").text
    assert "relevance_guard" in latency and "pipeline_total" in latency
    failures = browser.find_element(By.ID, "failures").text
    assert "stt speech_to_text stt_down" in failures
    assert "tts text_to_speech server_error" in failures
    screenshot(browser, shots, "latency")


def test_list_fits_a_phone_screen(browser, dashboard, shots):
    browser.set_window_size(*PHONE)
    browser.get(dashboard + "/")
    assert len(rows(browser)) == len(SCRIPT)
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page is {overflow} px wider than a {PHONE[0]} px screen"
    screenshot(browser, shots, "phone", PHONE)
