"""The catalog's actions in a real headless Chromium against ``herald up`` running the
built-in catalog application: an operator publishes a dataset with a reason, watches the
version become published without reloading, deletes it with a reason and finds both in
the audit log; the overview draws each queue's depth, running jobs and waiting age.

With ``HERALD_CONSOLE_SCREENSHOTS=<folder>`` the dataset, version and review pages are
saved there too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from herald.api import create_key
from herald.client import open_connection
from herald.config import Settings
from tests.browser import chromium, page_text, screenshot, serve_up, wait

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SPEC = {
    "id": "air",
    "title": "Air quality",
    "description": "Hourly measures of the city's stations.",
    "publisher": {"name": "Environment Office", "uri": "https://example.org/office"},
    "keywords": ["air", "environment"],
    "source": {"type": "generated", "count": 500},
}


@pytest.fixture
def catalog_up(settings: Settings, tmp_path: Path) -> Iterator[str]:
    with serve_up(settings, tmp_path, app="herald.demo:app") as url:
        yield url


def _confirm(driver: Any, reason: str) -> None:
    assert "What will happen" in page_text(driver)
    driver.find_element("id", "reason").send_keys(reason)
    driver.find_element("xpath", "//button[starts-with(normalize-space(), 'Confirm')]").click()


def _badge(driver: Any) -> str:
    return str(driver.find_element("css selector", "h1 .badge").text)


async def test_operator_publishes_and_deletes_a_version_with_reasons(
    settings: Settings, catalog_up: str
) -> None:
    url = catalog_up
    async with await open_connection(settings) as conn:
        admin = (await create_key(conn, "admin", ["admin"])).token
        ops = (await create_key(conn, "ops", ["read", "operate"])).token
    async with httpx.AsyncClient(base_url=url, timeout=30) as api:
        made = await api.post(
            "/v1/datasets", json=SPEC, headers={"Authorization": f"Bearer {admin}"}
        )
        assert made.status_code == 201, made.text
    shots = os.environ.get("HERALD_CONSOLE_SCREENSHOTS")

    with chromium() as driver:
        d: Any = driver
        d.get(f"{url}/ui/datasets/air")
        d.find_element("id", "api-key").send_keys(ops)
        d.find_element("css selector", "form button[type=submit]").click()
        wait("the dataset page", lambda: d.title.startswith("Dataset air"))
        assert "Not published yet" in page_text(d)
        d.find_element("link text", "Publish a new version…").click()
        wait("the review", lambda: "What will happen" in page_text(d))
        assert "Publish a new version of dataset air (Air quality)" in page_text(d)
        if shots:
            screenshot(d, Path(shots) / "publish-review-desktop.png", 1280, 900)
        _confirm(d, "stations recalibrated")
        link = wait(
            "the outcome",
            lambda: [
                a for a in d.find_elements("css selector", ".flash a") if "requested" in a.text
            ],
        )[0]
        link.click()
        wait("the version page", lambda: d.title.startswith("air version 1"))
        d.execute_script("window.heraldMarker = 'same page';")
        wait("the version published, live", lambda: _badge(d) == "published", within=120)
        assert d.execute_script("return window.heraldMarker") == "same page"
        text = page_text(d)
        # The validation, the files and the catalog entry came with the live update too.
        assert "conforms to the basic tier" in text, text
        assert "SHA-256" in text and "dcat:Dataset" in text, text
        if shots:
            screenshot(d, Path(shots) / "version-desktop.png", 1280, 900)
            d.get(f"{url}/ui/datasets/air")
            screenshot(d, Path(shots) / "dataset-desktop.png", 1280, 900)
            d.get(f"{url}/ui/datasets/air/versions/1")

        d.find_element("link text", "Delete this version…").click()
        wait("the review", lambda: "What will happen" in page_text(d))
        assert "Delete version 1 of dataset air: remove its" in page_text(d)
        _confirm(d, "published with the wrong calibration")
        wait("the version deleted, live", lambda: _badge(d) == "deleted", within=120)
        assert "No file is recorded for this version" in page_text(d)

        d.find_element("link text", "Audit log").click()
        wait("the audit log", lambda: d.title.startswith("Audit log"))
        rows = [
            [c.text for c in row.find_elements("css selector", "td")][1:5]
            for row in d.find_elements("css selector", "tbody tr")
        ]
        assert [
            "ops",
            "delete version",
            "dataset air",
            "published with the wrong calibration",
        ] in rows
        assert ["ops", "publish", "dataset air", "stations recalibrated"] in rows

        # The overview draws each queue over time, from the housekeeper's samples.
        d.get(f"{url}/ui/")
        charts = d.find_elements("css selector", "svg.chart[role=img]")
        titles = [
            c.find_element("css selector", "title").get_attribute("textContent") for c in charts
        ]
        assert any(t.startswith("Jobs due in queue") for t in titles), titles
        assert any(t.startswith("Oldest due job's age in queue") for t in titles), titles
        assert all(c.is_displayed() for c in charts)
