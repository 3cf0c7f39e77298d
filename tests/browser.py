"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) for tests.

``.ci/run`` installs both; on a machine without them a browser test is skipped locally
and fails in CI (where ``CI`` is set), never passes silently.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("HERALD_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("HERALD_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def require_browser() -> None:
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return
    message = f"needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[object]:
    """A fresh browser (its own profile directory), closed afterwards."""
    require_browser()
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium look for a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="herald-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: object, path: Path, width: int, height: int) -> None:
    """The whole page at ``width`` CSS pixels (a phone or a laptop), as a PNG."""
    run = driver.execute_cdp_cmd  # type: ignore[attr-defined]
    run(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    shot = run("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    run("Emulation.clearDeviceMetricsOverride", {})
    path.write_bytes(base64.b64decode(shot["data"]))
