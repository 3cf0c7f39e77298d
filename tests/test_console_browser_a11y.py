"""Accessibility and the phone layout in a real headless Chromium against ``herald up``:
the console is used with the keyboard alone (sign in, select a dead letter, replay it
with a reason), every control is reached by Tab and shows where the focus is, text has
a contrast of at least 4.5:1 (3:1 when large) in the light and the dark theme, and at a
phone's width no page scrolls sideways (wide tables scroll inside their own frame).

With ``HERALD_CONSOLE_SCREENSHOTS=<folder>`` the phone-width pictures are saved there
(else under the test's temporary folder); they are checked to be a phone's width.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.keys import Keys

from herald.api import create_key
from herald.client import Client, open_connection
from herald.config import Settings
from herald.schedules import ScheduleSpec, create_schedule
from tests.browser import chromium, page_text, serve_up, wait
from tests.support import APP

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
PHONE = (390, 844)

# Every element with text of its own: its colour against the first opaque background
# behind it, as WCAG 2 computes contrast. Large text (24 px, or 18.66 px bold) needs 3:1.
CONTRAST_JS = """
function rgb(value) {
  const m = value.match(/rgba?\\(([^)]+)\\)/);
  if (!m) { return null; }
  const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
  return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
}
function lum(c) {
  const f = v => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
}
function background(el) {
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c && c.a >= 0.99) { return c; }
  }
  const page = rgb(getComputedStyle(document.documentElement).backgroundColor);
  return page || {r: 255, g: 255, b: 255, a: 1};
}
const low = [];
for (const el of document.querySelectorAll("body *")) {
  const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
  if (!own) { continue; }
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  if (style.visibility === "hidden" || style.display === "none") { continue; }
  if (box.width <= 1 || box.height <= 1) { continue; }
  if (el.closest("[hidden], .sr-only, svg")) { continue; }
  const bg = background(el);
  let fg = rgb(style.color);
  const mix = k => fg[k] * fg.a + bg[k] * (1 - fg.a);
  fg = {r: mix("r"), g: mix("g"), b: mix("b")};
  const a = lum(fg), b = lum(bg);
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
  const need = (size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5;
  if (ratio < need) {
    const said = el.textContent.trim().slice(0, 30);
    low.push(`${el.tagName.toLowerCase()}.${el.className} '${said}' ${ratio.toFixed(2)}`);
  }
}
return low;
"""

# What Tab should reach: every visible, enabled control and link, in document order.
FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea, [tabindex='0']"
FOCUSABLE_JS = """
return Array.from(document.querySelectorAll(arguments[0])).filter(e => {
  const box = e.getBoundingClientRect();
  return !e.disabled && !e.closest("[hidden]") && box.width > 0 && box.height > 0;
}).length;
"""

# The focused element: its place among the focusable ones, and whether a ring shows.
FOCUSED_JS = """
const e = document.activeElement;
if (!e || e === document.body) { return null; }
const s = getComputedStyle(e);
const outline = s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2;
const all = Array.from(document.querySelectorAll(arguments[0])).filter(x => !x.disabled);
return [all.indexOf(e), outline || s.boxShadow !== "none", e.outerHTML.slice(0, 80)];
"""


@pytest.fixture
def herald_up(settings: Settings, tmp_path: Path) -> Iterator[str]:
    with serve_up(settings, tmp_path) as url:
        yield url


def _tab(driver: Any, times: int = 1, shift: bool = False) -> None:
    chord = Keys.SHIFT + Keys.TAB if shift else Keys.TAB
    for _ in range(times):
        driver.switch_to.active_element.send_keys(chord)


def _tab_to(driver: Any, css: str, limit: int = 200) -> None:
    """Press Tab until the element matching ``css`` has the focus."""
    for _ in range(limit):
        if driver.execute_script("return document.activeElement.matches(arguments[0])", css):
            return
        _tab(driver)
    raise AssertionError(f"Tab never reached {css}")


def _png_width(data: bytes) -> int:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width: int = struct.unpack(">I", data[16:20])[0]
    return width


async def _scene(settings: Settings, tmp_path: Path) -> dict[str, Any]:
    """Keys, a dead letter, a schedule and some jobs to look at."""
    async with await open_connection(settings) as conn:
        ops = (await create_key(conn, "ops", ["read", "operate"])).token
        schedule = await create_schedule(
            conn, ScheduleSpec("noop", "nightly-report", "daily", "UTC", at=dt.time(3))
        )
    gate = tmp_path / "a11y-gate"
    async with await Client.open(APP, settings) as client:
        dead = await client.enqueue("gate", {"gate": gate.name}, key="orders-2026-07-14")
        for n in range(5):
            await client.enqueue("echo", {"n": n}, key=f"order-{n}")
        await client.enqueue("slow_retry", {}, key="partner-api")
        deadline = time.monotonic() + 60
        while not (rows := await client.list_dead(kind="gate")):
            assert time.monotonic() < deadline, "the gate job never died"
            await asyncio.sleep(0.2)
    return {"ops": ops, "schedule": schedule.id, "dead": rows[0].id, "job": dead.id,
            "gate": gate}  # fmt: skip


async def test_the_console_is_used_with_the_keyboard_alone(
    settings: Settings, herald_up: str, tmp_path: Path
) -> None:
    url = herald_up
    scene = await _scene(settings, tmp_path)
    with chromium() as driver:
        d: Any = driver
        d.get(f"{url}/ui/dead-letters")
        assert d.title.startswith("Sign in")
        _tab(d)  # the first stop skips to the content
        first = d.execute_script(FOCUSED_JS, FOCUSABLE)
        assert first is not None and 'href="#main"' in first[2] and first[1], first
        _tab_to(d, "#api-key")
        d.switch_to.active_element.send_keys(scene["ops"], Keys.ENTER)
        wait("the dead letters page", lambda: d.title.startswith("Dead letters"))

        # Tab goes through every control and link of the page, each with a focus ring.
        d.execute_script("window.heraldMarker = 1; document.activeElement.blur();")
        expected = d.execute_script(FOCUSABLE_JS, FOCUSABLE)
        assert expected > 20  # navigation, filters, actions, rows
        seen: dict[int, tuple[bool, str]] = {}
        for _ in range(expected + 5):
            _tab(d)
            focused = d.execute_script(FOCUSED_JS, FOCUSABLE)
            if focused is not None:
                seen[focused[0]] = (focused[1], focused[2])
        assert -1 not in seen, seen[-1]  # nothing focusable that the count missed
        assert sorted(seen) == list(range(expected)), sorted(seen)
        assert [html for ring, html in seen.values() if not ring] == []

        # Select the dead letter and replay it, keys only.
        d.execute_script("document.activeElement.blur();")
        _tab_to(d, f"#dl-{scene['dead']}")
        d.switch_to.active_element.send_keys(Keys.SPACE)
        assert d.find_element("id", f"dl-{scene['dead']}").is_selected()
        _tab(d, shift=True)  # the actions come before the table
        _tab_to(d, "button[formaction$='dead_letter.replay']")  # wraps round if needed
        d.switch_to.active_element.send_keys(Keys.ENTER)
        wait("the review", lambda: "What will happen" in page_text(d))
        scene["gate"].write_text("fixed")
        _tab_to(d, "#reason")
        d.switch_to.active_element.send_keys("replayed from the keyboard")
        _tab(d)
        assert d.switch_to.active_element.text.startswith("Confirm")
        d.switch_to.active_element.send_keys(Keys.ENTER)
        wait("the outcome", lambda: "Replay: 1 done" in page_text(d))
        assert "replayed from the keyboard" in page_text(d)


async def test_contrast_in_both_themes_and_the_phone_layout(
    settings: Settings, herald_up: str, tmp_path: Path
) -> None:
    url = herald_up
    scene = await _scene(settings, tmp_path)
    folder = Path(os.environ.get("HERALD_CONSOLE_SCREENSHOTS") or tmp_path / "shots")
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    pages = {
        "overview": "/ui/",
        "jobs": "/ui/jobs",
        "job": f"/ui/jobs/{scene['job']}",
        "dead-letters": "/ui/dead-letters",
        "dead-letter": f"/ui/dead-letters/{scene['dead']}",
        "review": f"/ui/actions/dead_letter.replay?target={scene['dead']}",
        "schedules": "/ui/schedules",
        "schedule-edit": f"/ui/schedules/{scene['schedule']}/edit",
        "audit": "/ui/audit",
        "datasets": "/ui/datasets",
    }
    with chromium() as driver:
        d: Any = driver
        run = d.execute_cdp_cmd
        d.get(f"{url}/ui/")
        d.find_element("id", "api-key").send_keys(scene["ops"], Keys.ENTER)
        wait("the overview", lambda: d.title.startswith("Overview"))
        low: list[str] = []
        for theme in ("light", "dark"):
            run(
                "Emulation.setEmulatedMedia",
                {"features": [{"name": "prefers-color-scheme", "value": theme}]},
            )
            for name, path in pages.items():
                d.get(url + path)
                low += [f"{theme} {name}: {e}" for e in d.execute_script(CONTRAST_JS)]
        assert low == []

        run("Emulation.setEmulatedMedia", {"features": []})
        width, height = PHONE
        run(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
        )
        try:
            sideways: list[str] = []
            for name, path in pages.items():
                d.get(url + path)
                wide = d.execute_script(
                    "return [document.documentElement.scrollWidth, window.innerWidth]"
                )
                if wide[0] > wide[1]:
                    sideways.append(f"{name}: {wide[0]} px wide in {wide[1]} px")
                shot = run("Page.captureScreenshot", {"format": "png"})
                data = base64.b64decode(shot["data"])
                assert _png_width(data) == width
                (folder / f"{name}-phone.png").write_bytes(data)
            assert sideways == []
            # The navigation folds: every entry is on screen, none cut off at the side.
            d.get(url + "/ui/")
            cut = d.execute_script(
                "return Array.from(document.querySelectorAll('nav[aria-label=Main] a'))"
                ".filter(a => a.getBoundingClientRect().right > window.innerWidth)"
                ".map(a => a.textContent)"
            )
            assert cut == []
        finally:
            run("Emulation.clearDeviceMetricsOverride", {})
