"""Live updates in a real headless Chromium against ``herald up``: the overview, the jobs
list and the dead-letter list follow the engine without reloading; with script turned
off the same console is plain pages: an operator still finds and replays a dead job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from herald.api import create_key
from herald.client import Client, open_connection
from herald.config import Settings
from tests.browser import chromium, click, page_text, serve_up, sign_in, wait
from tests.support import APP

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def herald_up(settings: Settings, tmp_path: Path) -> Iterator[str]:
    with serve_up(settings, tmp_path) as url:
        yield url


def _wait(what: str, check: Callable[[], Any], within: float = 30.0) -> Any:
    return wait(what, check, within)


def _text(driver: Any) -> str:
    return page_text(driver)


def _tile(driver: Any, label: str) -> int:
    """The figure of an overview tile, read in one step (a live swap may be under way)."""
    found = driver.execute_script(
        """
        for (const tile of document.querySelectorAll(".tiles li")) {
          if (tile.querySelector(".label").textContent.startsWith(arguments[0])) {
            return Number(tile.querySelector(".figure").textContent);
          }
        }
        return null;
        """,
        label,
    )
    assert found is not None, f"no tile {label!r}"
    return int(found)


async def test_overview_and_lists_follow_the_engine_without_a_reload(
    settings: Settings, herald_up: str
) -> None:
    url = herald_up
    async with await open_connection(settings) as conn:
        ops = (await create_key(conn, "ops", ["read", "operate"])).token
    async with await Client.open(APP, settings) as client:
        with chromium() as driver:
            d: Any = driver
            d.get(f"{url}/ui/")
            sign_in(d, ops)
            _wait("the overview", lambda: d.title.startswith("Overview"))
            d.execute_script("window.heraldMarker = 'same page';")
            assert _tile(d, "dead letters") == 0
            await client.enqueue("permanent", {}, key="broken-feed")
            _wait("the dead letter counted live", lambda: _tile(d, "dead letters") == 1)
            assert "Updated" in d.find_element("css selector", "[data-live-status]").text

            d.get(f"{url}/ui/jobs?kind=echo")
            d.execute_script("window.heraldMarker = 'same page';")
            assert "No job matches" in _text(d)
            await client.enqueue("echo", {"n": 1}, key="late-order")
            _wait(
                "the new job listed and finished, live",
                lambda: "late-order" in _text(d) and "succeeded" in _text(d),
            )
            assert d.execute_script("return window.heraldMarker") == "same page"

            d.get(f"{url}/ui/dead-letters")
            d.execute_script("window.heraldMarker = 'same page';")
            assert "broken-feed" in _text(d) and "second-feed" not in _text(d)
            await client.enqueue("permanent", {}, key="second-feed")
            _wait("the second dead letter listed live", lambda: "second-feed" in _text(d))
            assert d.execute_script("return window.heraldMarker") == "same page"

            # A ticked row is the operator's: the list is left alone while it is.
            click(d, "input[name=target]")
            await client.enqueue("permanent", {}, key="third-feed")
            await asyncio.sleep(3.5)  # three refresh periods
            assert "third-feed" not in _text(d)
            d.find_elements("css selector", "input[name=target]:checked")[0].click()
            d.find_element("tag name", "h1").click()  # and the focus leaves the list
            _wait("the list refreshed once nothing is ticked", lambda: "third-feed" in _text(d))

            # Live updates can be paused from the footer, and stay paused.
            d.find_element("css selector", "[data-live-toggle]").click()
            assert "paused" in d.find_element("css selector", "[data-live-status]").text
            await client.enqueue("permanent", {}, key="fourth-feed")
            await asyncio.sleep(3.5)
            assert "fourth-feed" not in _text(d)
            d.find_element("css selector", "[data-live-toggle]").click()
            _wait("updates resumed", lambda: "fourth-feed" in _text(d))


async def test_without_script_the_console_is_plain_pages(
    settings: Settings, herald_up: str, tmp_path: Path
) -> None:
    url = herald_up
    async with await open_connection(settings) as conn:
        ops = (await create_key(conn, "ops", ["read", "operate"])).token
    gate = tmp_path / "no-script-gate"
    async with await Client.open(APP, settings) as client:
        dead_job = await client.enqueue("gate", {"gate": gate.name}, key="plain-page")
        deadline = time.monotonic() + 60
        while not await client.list_dead(kind="gate"):
            assert time.monotonic() < deadline, "the gate job never died"
            await asyncio.sleep(0.2)
        with chromium(javascript=False) as driver:
            d: Any = driver
            d.get(f"{url}/ui/dead-letters")
            sign_in(d, ops)
            _wait("the dead letters page", lambda: d.title.startswith("Dead letters"))
            # The script never ran: what it would show stays hidden.
            assert not d.find_element("css selector", "[data-live-toggle]").is_displayed()
            assert not d.find_element("id", "select-all").is_displayed()
            d.find_elements("css selector", "input[name=target]")[0].click()
            d.find_element("xpath", "//button[normalize-space()='Replay selected…']").click()
            _wait("the review", lambda: "What will happen" in _text(d))
            assert f"as a replay of job {dead_job.id}" in _text(d)
            gate.write_text("fixed")
            d.find_element("id", "reason").send_keys("fixed upstream, no script")
            d.find_element("xpath", "//button[starts-with(normalize-space(), 'Confirm')]").click()
            link = _wait(
                "the outcome",
                lambda: [
                    a for a in d.find_elements("css selector", ".flash a") if "replayed" in a.text
                ],
            )[0]
            link.click()
            # Without live updates a reload shows the replay's outcome.
            _wait(
                "the replay to succeed (reloading by hand)",
                lambda: (
                    d.refresh() or d.find_element("css selector", "h1 .badge").text == "succeeded"
                ),
            )
