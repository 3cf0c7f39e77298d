"""Generations in a real headless Chromium against ``herald up`` running the sample
generations application: an operator opens a partition, sees its current generation and
a rejected candidate with the coordinator's reason, follows the lineage to an input and
back, watches quarantined input resolved elsewhere leave the page live, discards a
waiting candidate with a reason and finds it in the audit log; the new pages keep their
contrast in both themes and never scroll sideways on a phone; a reader sees no action.

With ``HERALD_CONSOLE_SCREENSHOTS=<folder>`` the pages are saved there for the docs.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herald.api import create_key
from herald.config import Settings
from herald.db import connect, conninfo
from herald.generations import quarantine, sample
from herald.generations.store import ROOT_VARIABLE
from herald.ops.crypto import TokenCipher
from tests.browser import chromium, click, page_text, screenshot, serve_up, sign_in, wait
from tests.generations.console_scene import Scene, build_scene
from tests.generations.helpers import PARTITION, setup
from tests.test_console_browser_a11y import CONTRAST_JS, PHONE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
PAGE = f"/ui/generations/orders/partitions/{PARTITION}"


@pytest.fixture
async def scene(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Scene, dict[str, str]]:
    # The served process inherits the store's root from this environment.
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "store"))
    monkeypatch.setenv("HERALD_TOKEN_KEYS", TokenCipher.generate_key())  # webhook secrets
    sample.gens.use(settings)
    assert settings.database_url is not None
    async with await connect(conninfo(settings.database_url, settings.schema)) as conn:
        await setup(sample.gens, conn)
        built = await build_scene(sample.gens, conn, settings)
        keys = {
            "ops": (await create_key(conn, "ops", ["read", "operate"])).token,
            "viewer": (await create_key(conn, "viewer", ["read"])).token,
        }
    return built, keys


@pytest.fixture
def generations_up(
    settings: Settings, tmp_path: Path, scene: tuple[Scene, dict[str, str]]
) -> Iterator[str]:
    with serve_up(settings, tmp_path, app="herald.generations.sample:app") as url:
        yield url


def _shoot(driver: Any, name: str) -> None:
    shots = os.environ.get("HERALD_CONSOLE_SCREENSHOTS")
    if shots:
        screenshot(driver, Path(shots) / f"{name}-desktop.png", 1280, 900)


async def test_an_operator_follows_a_partition_and_discards_a_candidate_with_a_reason(
    generations_up: str, scene: tuple[Scene, dict[str, str]], settings: Settings
) -> None:
    assert settings.database_url is not None
    url, (built, keys) = generations_up, scene
    with chromium() as driver:
        d: Any = driver
        d.get(f"{url}/ui/generations")
        sign_in(d, keys["ops"])
        wait("the datasets", lambda: d.title.startswith("Generations"))
        click(d, "a[href$='/generations/orders']")
        wait("the dataset", lambda: d.title.startswith("Generations of orders"))
        _shoot(d, "generations-dataset")
        click(d, f"a[href$='/partitions/{PARTITION}']")
        wait("the partition", lambda: d.title.startswith(f"Partition orders/{PARTITION}"))
        text = page_text(d)
        assert "generation 2 (correction)" in text
        rejected = d.find_element(
            "xpath", f"//tr[td[1][normalize-space()='{built.rejected_candidate}']]"
        )
        assert "rejected" in rejected.text
        assert "checks failed: pre-publication checks failed: row_count: 0 rows" in rejected.text
        _shoot(d, "generations-partition")

        # Lineage: the generation, one of its inputs, and back from the input.
        click(d, "section[aria-labelledby=p-current] a[href$='/generations/2']")
        wait("the generation", lambda: d.title.startswith("Generation 2 of orders"))
        text = page_text(d)
        assert f"run {built.repair_run} (repair, policy wait)" in text
        assert f"added: {built.late}; dropped: none" in text
        _shoot(d, "generations-lineage")
        click(d, f"a[href$='/generations/inputs/{built.late}']")
        wait("the input", lambda: d.title.startswith(f"Input {built.late} of orders"))
        assert f"Generation 2 of {PARTITION}" in page_text(d)
        _shoot(d, "generations-input")
        click(d, "a[href$='/generations/2']")
        wait("the generation again", lambda: d.title.startswith("Generation 2 of orders"))
        click(d, "a[href$=" + repr(f"/partitions/{PARTITION}") + "]")
        wait("the partition again", lambda: d.title.startswith("Partition orders"))

        # Live: an item resolved elsewhere leaves the page without a reload.
        held = f"a[aria-label='Discard item {built.held_item}…']"
        assert d.find_elements("css selector", held)
        d.execute_script("window.heraldMarker = 'no reload'")
        async with await connect(conninfo(settings.database_url, settings.schema)) as conn:
            await quarantine.resolve(sample.gens, conn, built.held_item, "discard",
                                     actor="cli:oncall", reason="bad export, resent")  # fmt: skip
        wait("the live update", lambda: not d.find_elements("css selector", held))
        assert d.execute_script("return window.heraldMarker") == "no reload"
        assert "cli:oncall: “bad export, resent”" in page_text(d)

        click(d, f"a[href*='gen_candidate.discard'][href$='/{built.waiting_candidate}']")
        wait("the review", lambda: "What will happen" in page_text(d))
        assert f"Discard candidate {built.waiting_candidate} of orders/{PARTITION}" in page_text(d)
        _shoot(d, "generations-review")
        d.find_element("id", "reason").send_keys("the repair run supersedes it")
        d.find_element("xpath", "//button[starts-with(normalize-space(), 'Confirm')]").click()
        wait("the outcome", lambda: "discarded by an operator" in page_text(d))
        assert "by ops: “the repair run supersedes it”" in page_text(d)

        d.find_element("link text", "Audit log").click()
        wait("the audit log", lambda: d.title.startswith("Audit log"))
        expected = ["ops", "generations.discard", f"gen candidate {built.waiting_candidate}",
                    "the repair run supersedes it"]  # fmt: skip

        def entries() -> list[list[str]]:  # read again if a live update replaced the rows
            return [
                [c.text for c in row.find_elements("css selector", "td")][1:5]
                for row in d.find_elements("css selector", "tbody tr")
            ]

        wait("the audit entry", lambda: expected in entries())

        pages = [
            "/ui/generations", "/ui/generations/orders", PAGE, f"{PAGE}/generations/2",
            f"/ui/generations/inputs/{built.first}", f"/ui/generations/runs/{built.waiting_run}",
            f"/ui/generations/backfills/{built.backfill}",
        ]  # fmt: skip
        _contrast_and_phone(d, url, pages)

        d.find_element("xpath", "//button[normalize-space()='Sign out']").click()
        wait("the sign-in page", lambda: d.title.startswith("Sign in"))
        sign_in(d, keys["viewer"])
        # the operator's view of a partition needs operate, as in the API
        d.get(url + PAGE)
        wait("the partition refused to a reader", lambda: "'operate' scope" in page_text(d))
        d.get(url + "/ui/generations/orders")
        wait("the dataset as a reader", lambda: d.title.startswith("Generations of orders"))
        assert d.find_elements("css selector", f"a[href$='/partitions/{PARTITION}']") == []
        assert d.find_elements("css selector", "a[href*='/actions/']") == []


def _contrast_and_phone(d: Any, url: str, pages: list[str]) -> None:
    """What test_console_browser_a11y holds for the engine's pages, for these."""
    run = d.execute_cdp_cmd
    low: list[str] = []
    for theme in ("light", "dark"):
        run(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": theme}]},
        )
        for path in pages:
            d.get(url + path)
            low += [f"{theme} {path}: {e}" for e in d.execute_script(CONTRAST_JS)]
    run("Emulation.setEmulatedMedia", {"features": []})
    assert low == []
    width, height = PHONE
    run(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
    )
    try:
        sideways = []
        for path in pages:
            d.get(url + path)
            wide = d.execute_script(
                "return [document.documentElement.scrollWidth, window.innerWidth]"
            )
            if wide[0] > wide[1]:
                sideways.append(f"{path}: {wide[0]} px wide in {wide[1]} px")
        assert sideways == []
        shots = os.environ.get("HERALD_CONSOLE_SCREENSHOTS")
        if shots:  # the first screen, as a phone shows it
            d.get(url + PAGE)
            shot = run("Page.captureScreenshot", {"format": "png"})
            (Path(shots) / "generations-partition-phone.png").write_bytes(
                base64.b64decode(shot["data"])
            )
    finally:
        run("Emulation.clearDeviceMetricsOverride", {})
