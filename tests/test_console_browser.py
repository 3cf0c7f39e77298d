"""The console in a real headless Chromium against ``herald up`` (API, console, worker,
scheduler in one process): an operator signs in, finds a dead job, replays it with a
reason and watches it succeed without reloading, finds the audit record, pauses a
schedule; a key with only ``read`` sees no action and its forged requests are refused.

With ``HERALD_CONSOLE_SCREENSHOTS=<folder>`` the test also saves the main pages at a
laptop's and a phone's width (the pictures of ``docs/console.md``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from herald.api import create_key
from herald.client import Client, open_connection
from herald.config import Settings
from herald.schedules import ScheduleSpec, create_schedule
from tests.browser import chromium, click, page_text, screenshot, serve_up, sign_in, wait
from tests.eventually import eventually
from tests.support import APP

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def herald_up(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """``herald up`` on a free port, live updates every second; yields its base URL."""
    with serve_up(settings, tmp_path) as url:
        yield url


def _wait(what: str, check: Callable[[], Any], within: float = 30.0) -> Any:
    return wait(what, check, within)


def _visible_text(driver: Any) -> str:
    return page_text(driver)


def _confirm(driver: Any, reason: str) -> None:
    """On a review page: give the reason and confirm."""
    assert "What will happen" in _visible_text(driver)
    driver.find_element("id", "reason").send_keys(reason)
    driver.find_element("xpath", "//button[starts-with(normalize-space(), 'Confirm')]").click()


async def test_operator_replays_a_dead_job_and_a_reader_cannot_act(
    settings: Settings, herald_up: str, tmp_path: Path
) -> None:
    url = herald_up
    async with await open_connection(settings) as conn:
        ops = (await create_key(conn, "ops", ["read", "operate"])).token
        viewer = (await create_key(conn, "viewer", ["read"])).token
        schedule = await create_schedule(
            conn, ScheduleSpec("noop", "nightly-report", "daily", "UTC", at=dt.time(3))
        )
    gate = tmp_path / "upstream-ready"
    async with await Client.open(APP, settings) as client:
        dead_job = await client.enqueue("gate", {"gate": gate.name}, key="orders-2026-07-14")

        async def dead_letter() -> int | None:
            rows = await client.list_dead(kind="gate")
            return int(rows[0].id) if rows else None

        dead_id = await eventually(dead_letter, what="the gate job to die", within=60, interval=0.2)

        with chromium() as driver:
            d: Any = driver
            d.get(f"{url}/ui/dead-letters")
            sign_in(d, ops)  # back to the page asked for
            _wait("the dead letters page", lambda: d.title.startswith("Dead letters"))
            assert "upstream not ready" in _visible_text(d)
            click(d, f"#dl-{dead_id}")
            d.find_element("xpath", "//button[normalize-space()='Replay selected…']").click()
            _wait("the review", lambda: "What will happen" in _visible_text(d))
            assert f"as a replay of job {dead_job.id}" in _visible_text(d)
            gate.write_text("fixed")  # the upstream is repaired before the replay
            _confirm(d, "upstream fixed, replaying")
            flash = _wait("the outcome", lambda: d.find_elements("css selector", ".flash a"))
            link = next(a for a in flash if "replayed as job" in a.text)
            new_job = int(link.text.rsplit(" ", 1)[1])
            link.click()
            _wait("the new job's page", lambda: d.title.startswith(f"Job {new_job}"))
            d.execute_script("window.heraldMarker = 'same page';")
            badge = "h1 .badge"
            _wait(
                "the replay to succeed, shown by a live update",
                lambda: d.find_element("css selector", badge).text == "succeeded",
            )
            assert d.execute_script("return window.heraldMarker") == "same page"  # no reload
            assert f"replay of job {dead_job.id}" in _visible_text(d)

            d.find_element("link text", "Audit log").click()
            _wait("the audit log", lambda: d.title.startswith("Audit log"))
            cells = [c.text for c in d.find_elements("css selector", "tbody tr:first-child td")]
            assert cells[1:5] == [
                "ops",
                "replay",
                f"dead letter {dead_id}",
                "upstream fixed, replaying",
            ]

            d.get(f"{url}/ui/schedules/{schedule.id}")
            d.find_element("link text", "Pause…").click()
            _confirm(d, "maintenance window")
            _wait(
                "the schedule paused", lambda: "paused" in d.find_element("css selector", "h1").text
            )
            assert "maintenance window" in _visible_text(d)

            if os.environ.get("HERALD_CONSOLE_SCREENSHOTS"):
                await _screenshots(d, url, client, new_job, dead_id, schedule.id)

            d.find_element("xpath", "//button[normalize-space()='Sign out']").click()
            _wait("the sign-in page", lambda: d.title.startswith("Sign in"))
            sign_in(d, viewer)
            d.get(f"{url}/ui/dead-letters")
            assert "upstream not ready" in _visible_text(d)
            assert d.find_elements("css selector", "input[name=target]") == []
            assert "Replay selected" not in d.page_source
            d.get(f"{url}/ui/schedules/{schedule.id}")
            assert "Resume…" not in _visible_text(d) and "Edit…" not in _visible_text(d)
            forged = d.execute_async_script(
                """
                const done = arguments[arguments.length - 1];
                const csrf = document.querySelector("input[name=csrf]").value;
                fetch(arguments[0], {method: "POST", body: new URLSearchParams(
                    {csrf: csrf, target: arguments[1], reason: "forged"})})
                  .then(r => done(r.status), e => done(String(e)));
                """,
                f"{url}/ui/actions/schedule.resume/run",
                str(schedule.id),
            )
            assert forged == 403

            # A page of another site posting to the console: the SameSite=Strict cookie
            # stays home, so the request is not even signed in.
            d.get(
                "data:text/html,<form method=post action='"
                + f"{url}/ui/actions/schedule.resume/run'>"
                + f"<input name=target value={schedule.id}><input name=reason value=x>"
                + "<input name=csrf value=guess></form><script>document.forms[0].submit()</script>"
            )
            _wait("the forged form to land", lambda: d.current_url.startswith(url))
            assert d.title.startswith(("Sign in", "Not allowed"))

    async with await open_connection(settings) as conn:
        cur = await conn.execute("SELECT paused FROM schedules")
        assert (await cur.fetchone()) == {"paused": True}
        cur = await conn.execute("SELECT actor, action, reason FROM audit_log ORDER BY id")
        assert await cur.fetchall() == [
            {"actor": "ops", "action": "replay", "reason": "upstream fixed, replaying"},
            {"actor": "ops", "action": "pause", "reason": "maintenance window"},
        ]
        cur = await conn.execute(
            "SELECT state::text FROM jobs WHERE replay_of = %s", (dead_job.id,)
        )
        assert await cur.fetchall() == [{"state": "succeeded"}]


async def _screenshots(
    d: Any, url: str, client: Client, job_id: int, dead_id: int, schedule_id: int
) -> None:
    """Fill the queues a little, then save each main page at laptop and phone width."""
    folder = Path(os.environ["HERALD_CONSOLE_SCREENSHOTS"])
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    async with client.pool.connection() as conn:
        # An hour of history for the charts: finished jobs of two queues, some failed
        # attempts among them (rows as the worker writes them).
        await conn.execute(
            "INSERT INTO jobs (kind, queue, state, attempt, fence, created_at, run_at, "
            "attempted_at, finished_at, errors) "
            "SELECT 'echo', q, 'succeeded', 1 + (g % 7 = 0)::int, 1, t, t, t, t, "
            "CASE WHEN g % 7 = 0 THEN jsonb_build_array(jsonb_build_object('at', t, "
            "'attempt', 1, 'kind', 'retry', 'message', 'partner API answered 503')) "
            "ELSE '[]' END "
            "FROM generate_series(1, 900) g, unnest(ARRAY['default', 'mail']) q, "
            "LATERAL (SELECT herald_now() - g * interval '4 seconds' "
            "- (q = 'mail')::int * interval '5 minutes' AS t) x "
            "WHERE q = 'default' OR g % 3 = 0"
        )
        # And the housekeeper's queue samples of that hour: depth, running, waiting age.
        await conn.execute(
            "INSERT INTO queue_samples (at, queues) "
            "SELECT herald_now() - g * interval '30 seconds', jsonb_build_object("
            "'default', jsonb_build_object('available', d, 'scheduled', 0, 'running', "
            "least(d, 2), 'oldest_waiting_s', CASE WHEN d > 0 THEN d * 4.5 END), "
            "'mail', jsonb_build_object('available', d / 3, 'scheduled', 1, 'running', "
            "(d > 5)::int, 'oldest_waiting_s', CASE WHEN d > 2 THEN d * 2.0 END)) "
            "FROM generate_series(1, 119) g, "
            "LATERAL (SELECT greatest(0, round(12 + 11 * sin(g / 9.0)))::int AS d) x"
        )
    for n in range(40):
        await client.enqueue("echo", {"n": n})
    for n in range(3):
        await client.enqueue("fail", {"n": n}, key=f"flaky-{n}")
    await client.enqueue("slow_retry", {}, key="partner-api")
    await asyncio.sleep(3)
    pages = {
        "overview": "/ui/",
        "jobs": "/ui/jobs",
        "job": f"/ui/jobs/{job_id}",
        "dead-letters": "/ui/dead-letters",
        "dead-letter": f"/ui/dead-letters/{dead_id}",
        "review": f"/ui/actions/dead_letter.replay?target={dead_id}",
        "schedules": "/ui/schedules",
        "audit": "/ui/audit",
    }
    for name, path in pages.items():
        d.get(url + path)
        screenshot(d, folder / f"{name}-desktop.png", 1280, 900)
        screenshot(d, folder / f"{name}-phone.png", 390, 844)
