"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) for tests.

``.ci/run`` installs both; on a machine without them a browser test is skipped locally
and fails in CI (where ``CI`` is set), never passes silently.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from herald.config import Settings

ROOT = Path(__file__).resolve().parent.parent

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
def chromium(width: int = 1280, height: int = 900, javascript: bool = True) -> Iterator[object]:
    """A fresh browser (its own profile directory), closed afterwards; with
    ``javascript=False`` it runs no script at all (what the console must work without)."""
    require_browser()
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium look for a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="herald-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_up(settings: Settings, tmp_path: Path, app: str = "tests.support:APP") -> Iterator[str]:
    """``herald up`` of ``app`` on a free port, live updates every second, its files
    under ``tmp_path``; yields its base URL and stops it (SIGTERM) afterwards."""
    assert settings.database_url is not None
    port = _free_port()
    log_path = tmp_path / "up.log"
    env = {
        **os.environ,
        "HERALD_DATABASE_URL": settings.database_url,
        "HERALD_SCHEMA": settings.schema,
        "HERALD_POLL_INTERVAL": "0.2",
        "HERALD_CONSOLE_REFRESH": "1",
        "HERALD_TEST_GATE_DIR": str(tmp_path),
        "HERALD_DATA_DIR": str(tmp_path / "data"),
    }
    argv = ["--app", app, "up", "--port", str(port), "--concurrency", "2"]
    argv += ["--scheduler-interval", "0.5"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "herald", *argv], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (
                "herald up did not get ready\n" + log_path.read_text()
            )
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def page_text(driver: Any) -> str:
    """The page's visible text; empty while a navigation has no body yet."""
    from selenium.common.exceptions import NoSuchElementException, WebDriverException

    try:
        return str(driver.find_element("tag name", "body").text)
    except NoSuchElementException:
        return ""
    except WebDriverException as exc:
        if replaced(exc):
            return ""
        raise


def replaced(exc: Exception) -> bool:
    """Whether ``exc`` says an element was replaced under the driver (a live swap or a
    navigation): stale, or Chromium's "node does not belong to the document"."""
    from selenium.common.exceptions import StaleElementReferenceException

    return isinstance(exc, StaleElementReferenceException) or (
        "does not belong to the document" in str(exc)
    )


def wait(what: str, check: Callable[[], Any], within: float = 30.0) -> Any:
    """``check()`` once it is truthy; an element a live swap or a navigation replaced
    meanwhile counts as "not yet"."""
    from selenium.common.exceptions import NoSuchElementException, WebDriverException

    deadline = time.monotonic() + within
    while True:
        try:
            found = check()
        except NoSuchElementException:
            found = None
        except WebDriverException as exc:
            if not replaced(exc):
                raise
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def click(driver: Any, css: str) -> None:
    """Click the first element matching ``css``, again if a live swap replaced it
    between finding and clicking."""
    from selenium.common.exceptions import WebDriverException

    for _ in range(10):
        try:
            driver.find_elements("css selector", css)[0].click()
            return
        except IndexError:
            time.sleep(0.1)
        except WebDriverException as exc:
            if not replaced(exc):
                raise
            time.sleep(0.1)
    raise AssertionError(f"{css} kept being replaced (or never appeared)")


def sign_in(driver: Any, token: str) -> None:
    """Sign in on the sign-in page and wait until the browser has left it: a ``get``
    issued while the form's redirect is still in flight can lose to that redirect."""
    wait("the sign-in page", lambda: driver.title.startswith("Sign in"))
    driver.find_element("id", "api-key").send_keys(token)
    driver.find_element("css selector", "form button[type=submit]").click()
    wait("the sign-in to finish", lambda: not driver.title.startswith("Sign in"))
