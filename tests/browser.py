"""What the browser tests share (tests/test_dashboard_browser.py, tests/test_web_browser.py):
Debian's ``chromium`` driven by Selenium through ``chromium-driver``, headless, and full-page
PNG screenshots for ``docs/img``."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tests.conftest import ROOT, needs_tools

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = needs_tools("chromium", "chromedriver")
"""Debian's chromium and chromium-driver: skipped without them, failed under CI
(``VOICE_RAG_REQUIRE_TOOLS=1``; tests/conftest.py)."""

DESKTOP = (1280, 860)
PHONE = (390, 844)
"""Window sizes in CSS pixels: a laptop's, and a phone's (an iPhone 12-15's viewport)."""
MAX_SHOT_HEIGHT = 4000
"""Tallest full-page screenshot, in pixels (longer pages are cut there)."""

T = TypeVar("T")


@contextmanager
def chromium(args: Iterable[str] = (), prefs: dict[str, Any] | None = None,
             env: dict[str, str] | None = None) -> Iterator[Any]:
    """A headless Chromium (Selenium ``webdriver.Chrome``) at :data:`DESKTOP` size, with
    ``args`` added to its command line and ``prefs`` to its preferences, ``env`` (None: this
    process's) as chromedriver's and so Chromium's environment; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--hide-scrollbars", "--lang=en-US", f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
                *args):
        options.add_argument(arg)
    if prefs:
        options.add_experimental_option("prefs", prefs)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env=env), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot_folder(variable: str, tmp_path_factory) -> Path:
    """``$variable`` (relative to the checkout, e.g. ``docs/img``) when set, else a temporary
    folder."""
    folder = os.environ.get(variable)
    if folder:
        path = Path(folder) if Path(folder).is_absolute() else ROOT / folder
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("screenshots")


def screenshot(driver, path: Path, size: tuple[int, int] = DESKTOP) -> Path:
    """The whole page as a PNG at ``path``: the viewport is set to the page's full height
    through the DevTools protocol (a window cannot grow past the headless screen)."""
    driver.set_window_size(*size)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": size[0], "height": min(max(size[1], int(height)), MAX_SHOT_HEIGHT),
        "deviceScaleFactor": 1, "mobile": size == PHONE})
    try:
        assert driver.save_screenshot(str(path))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    return path


def wait_for(condition: Callable[[], T], timeout_s: float = 10.0, step_s: float = 0.05) -> T:
    """``condition()``'s first truthy value, polled every ``step_s`` seconds.

    Raises:
        TimeoutError: none within ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step_s)
    raise TimeoutError("condition not met in time")
