"""Debian's headless Chromium driven by selenium through Debian's ChromeDriver: how the
inspector's browser tests and ``inspect_open.py`` open a page as a person would.

Nothing is downloaded: the browser and the driver are the system's (``scripts/_browser.sh``
installs them; ``CTX_CHROMIUM`` / ``CTX_CHROMEDRIVER`` name them, else ``PATH`` does), and the
flags keep Chromium off the network (no background requests, no component updates).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["FLAGS", "available", "chromium"]

FLAGS = (
    "--headless=new",
    "--no-sandbox",  # root in CI
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1400,1800",
)


def _paths() -> tuple[str | None, str | None]:
    browser = os.environ.get("CTX_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("CTX_CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


def available() -> str | None:
    """None when the browser, the driver and selenium are all here, else what is missing."""
    browser, driver = _paths()
    missing = [name for name, path in (("chromium", browser), ("chromedriver", driver)) if not path]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    return ", ".join(missing) or None


@contextmanager
def chromium(width: int = 1400, height: int = 1800) -> Iterator[Any]:
    """A selenium ``WebDriver`` on a fresh, throwaway Chromium profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = _paths()
    if not browser or not driver:
        raise RuntimeError(f"headless Chromium is not installed ({available()})")
    profile = tempfile.mkdtemp(prefix="ctx-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        session.set_page_load_timeout(60)
        yield session
    finally:
        session.quit()
        shutil.rmtree(profile, ignore_errors=True)
