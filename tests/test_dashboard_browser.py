"""The dashboard in a real headless browser: Debian's ``chromium`` driven by Selenium through
``chromium-driver``, against ``python -m bot dashboard`` (its own process) over a decision log
filled by real bot runs (tests/dashboard_runs.py). The list, a filter, a decision's chain, the
CSV export (downloaded by the browser), the other pages, and the list on a phone-sized window.
Each test runs twice: over the bots' SQLite file (``--db``), and over a PostgreSQL database the
bots wrote through ``BOT_DATABASE_URL`` as replicas do, which the dashboard finds through the
same variable (the session's throwaway cluster; ``postgres``).

Each view is saved as a PNG, ``dashboard-<view>.png`` (SQLite) and ``dashboard-pg-<view>.png``
(PostgreSQL): into ``$DASHBOARD_SCREENSHOT_DIR`` when set (``docs/img`` makes the screenshots
in docs/channels.md and docs/operations.md), else a temporary folder:

    DASHBOARD_SCREENSHOT_DIR=docs/img python3 -m pytest -q tests/test_dashboard_browser.py

Slow (a browser and a child process); skipped, saying why, only where chromium or its driver is
not installed (``.ci/run`` installs both, and fails them there: ``VOICE_RAG_REQUIRE_TOOLS=1``).
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.browser import (
    DESKTOP,
    PHONE,
    chromium,
    needs_chromium,
    screenshot,
    screenshot_folder,
    wait_for,
)
from tests.conftest import ROOT, needs_tools
from tests.dashboard_runs import BACKENDS, PM, SCRIPT, logged_database
from tests.pgcluster import query_rows

pytestmark = [
    pytest.mark.slow,
    needs_chromium,
    needs_tools("espeak-ng", "ffmpeg"),
]


@pytest.fixture(scope="module", params=BACKENDS)
def bot_db(request, tmp_path_factory, fake_settings, fake_pipeline) -> Path | str:
    """The bots' log: an SQLite file, or a PostgreSQL database's URL."""
    return logged_database(request, tmp_path_factory, fake_settings, fake_pipeline,
                           "dashboard_browser")


@pytest.fixture(scope="module")
def dashboard(bot_db, fake_index_dir) -> Iterator[str]:
    """``python -m bot dashboard --port 0`` on the bots' log (``--db FILE``; a PostgreSQL URL
    as ``BOT_DATABASE_URL``, the bot's own setting); yields its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOT_DB", "BOT_DASHBOARD_"))
           and k != "BOT_DATABASE_URL"}
    env["BOT_DASHBOARD_INDEX_DIR"] = str(fake_index_dir)
    database = ["--db", str(bot_db)]
    if isinstance(bot_db, str):
        env["BOT_DATABASE_URL"], database = bot_db, []
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "dashboard", "--port", "0", *database],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()  # "dashboard: http://127.0.0.1:PORT/ (database ...)"
        match = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/ \(database (\S+),", line)
        assert match, f"python -m bot dashboard printed {line!r} (exit {process.poll()})"
        assert match.group(2) == str(bot_db)  # the log the bots wrote, not a default
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def downloads(tmp_path_factory, bot_db) -> Path:
    """The browser's download folder, a new one per database (so is the browser)."""
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    with chromium(prefs={"download.default_directory": str(downloads),
                         "download.prompt_for_download": False}) as driver:
        yield driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory, bot_db) -> Callable[..., Path]:
    """``shots(driver, view, size=DESKTOP)`` saves the whole page as ``dashboard-<view>.png``
    over SQLite, ``dashboard-pg-<view>.png`` over PostgreSQL."""
    folder = screenshot_folder("DASHBOARD_SCREENSHOT_DIR", tmp_path_factory)
    prefix = "dashboard-" if isinstance(bot_db, Path) else "dashboard-pg-"

    def shot(driver, view: str, size: tuple[int, int] = DESKTOP) -> Path:
        return screenshot(driver, folder / f"{prefix}{view}.png", size)

    return shot


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
    shots(browser, "questions")


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
    shots(browser, "filtered")

    Select(browser.find_element(By.ID, "filter-channel")).select_by_value("whatsapp")
    browser.find_element(By.ID, "apply").click()
    wait_for(lambda: "channel=whatsapp" in browser.current_url)
    [whatsapp] = rows(browser)
    assert whatsapp.get_attribute("data-channel") == "whatsapp"


def test_a_decisions_chain_with_milliseconds_and_citations(browser, dashboard, bot_db, shots):
    from selenium.webdriver.common.by import By

    [(voice_id,)] = query_rows(bot_db, "SELECT id FROM decisions WHERE source = 'voice' AND "
                                       "status = 'answered'")
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
    shots(browser, "decision")


def test_refused_questions_export_downloads_as_csv(browser, dashboard, downloads, shots):
    from selenium.webdriver.common.by import By

    browser.set_window_size(*DESKTOP)
    browser.get(dashboard + "/refusals")
    table = browser.find_element(By.ID, "refusals").text
    assert "below_floor en 3" in table
    shots(browser, "refusals")
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
    shots(browser, "scores")
    browser.get(dashboard + "/latency")
    latency = browser.find_element(By.ID, "latency").text
    assert "relevance_guard" in latency and "pipeline_total" in latency
    failures = browser.find_element(By.ID, "failures").text
    assert "stt speech_to_text stt_down" in failures
    assert "tts text_to_speech server_error" in failures
    shots(browser, "latency")


def test_list_fits_a_phone_screen(browser, dashboard, shots):
    browser.set_window_size(*PHONE)
    browser.get(dashboard + "/")
    assert len(rows(browser)) == len(SCRIPT)
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page is {overflow} px wider than a {PHONE[0]} px screen"
    shots(browser, "phone", PHONE)
