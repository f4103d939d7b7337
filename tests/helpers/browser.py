"""A real browser for the pages medlama writes: headless Debian Chromium driven by Selenium.

``.ci/run`` installs ``chromium`` and ``chromium-driver`` before the tests; in CI a browser test that finds no
browser fails (a page nobody opened is not tested), elsewhere it skips with the reason. Selenium is pointed at the
installed driver and browser, so it never looks for (or downloads) one of its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_CANDIDATES = ("chromedriver",)


def _first_on_path(names: tuple[str, ...], variable: str) -> str | None:
    if os.environ.get(variable):
        return os.environ[variable]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """A headless Chromium (a ``selenium.webdriver.Chrome``) with its own empty profile, closed after the test.

    Pages are opened from ``file://`` with ``browser.get(path.as_uri())``; the profile lives under the test's
    temporary folder, so ``localStorage`` survives a reload within a test and nothing leaks between tests.
    """
    binary = _first_on_path(CHROMIUM_CANDIDATES, "MEDLAMA_CHROMIUM")
    driver_path = _first_on_path(DRIVER_CANDIDATES, "MEDLAMA_CHROMEDRIVER")
    if binary is None or driver_path is None:
        _missing("no headless browser: install Debian's chromium and chromium-driver (apt), as .ci/run does")
    try:
        import selenium  # noqa: F401 - the test extra; only browser tests need it
    except ImportError:
        _missing("selenium is not installed: pip install '.[test]'")
    driver = start_chromium(tmp_path)
    try:
        yield driver
    finally:
        driver.quit()


def start_chromium(folder: Path, *, size: str = "1400,1000") -> object:
    """A headless Chromium (a ``selenium.webdriver.Chrome``) with a fresh profile under ``folder`` and its
    downloads in ``folder/downloads`` (``driver.downloads``), the installed browser and driver (as the fixture
    finds them); for the fixture, and for scripts that open pages (the README's screenshots, benchmarks)."""
    from selenium import webdriver  # the test extra; only browser tests need it
    from selenium.webdriver.chrome.service import Service  # the test extra; only browser tests need it

    binary = _first_on_path(CHROMIUM_CANDIDATES, "MEDLAMA_CHROMIUM")
    driver_path = _first_on_path(DRIVER_CANDIDATES, "MEDLAMA_CHROMEDRIVER")
    if binary is None or driver_path is None:
        raise RuntimeError("no headless browser: install Debian's chromium and chromium-driver (apt)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    profile = Path(folder) / "chromium-profile"
    # The flags a closed network and a root user need: no sandbox (root), no GPU, no background connections
    # (refused here, many at a time), a fresh profile.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--window-size={size}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    # Downloads (an export button) land in the test's folder without asking
    downloads = Path(folder) / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.downloads = downloads  # where the page's downloads land, for the test to read
    driver.set_page_load_timeout(120)
    return driver


def wait_for(driver: object, condition, timeout: float = 60.0):
    """Wait until ``condition(driver)`` is truthy (a generous limit: a busy CI machine is slow, not broken)."""
    from selenium.webdriver.support.ui import WebDriverWait  # the test extra; only browser tests need it

    return WebDriverWait(driver, timeout).until(condition)


def wait_for_file(folder: Path, pattern: str, timeout: float = 60.0) -> Path:
    """The first finished file matching ``pattern`` in ``folder`` (a download in progress ends in .crdownload)."""
    import time  # a poll loop, for download tests only

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [p for p in folder.glob(pattern) if not p.name.endswith(".crdownload")]
        if done:
            return done[0]
        time.sleep(0.2)
    raise AssertionError(f"no file matching {pattern} appeared in {folder} within {timeout:.0f} s")

