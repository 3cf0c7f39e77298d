"""Live updates over HTTP: each page's changing part is answered alone (header
``X-Herald-Fragment``), follows the engine and the page's filters, and the same page
without the header is a whole, plain HTML page (what a browser without script gets).

The script swapping the parts in is driven in a real browser by
``test_console_browser_live.py``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from herald.config import Settings
from herald.schedules import ScheduleSpec, create_schedule
from tests.console_kit import Console, open_console, sign_in
from tests.support import running_worker, wait_for_job

# Each list page and the name of its live part.
LIVE_PAGES = {
    "/ui/": "overview",
    "/ui/jobs": "jobs",
    "/ui/dead-letters": "dead",
    "/ui/schedules": "schedules",
    "/ui/audit": "audit",
    "/ui/datasets": "datasets",
}


@pytest.fixture
async def console(settings: Settings) -> AsyncIterator[Console]:
    async with open_console(settings) as found:
        yield found


async def _part(http: httpx.AsyncClient, path: str, name: str) -> str:
    answer = await http.get(path, headers={"X-Herald-Fragment": name})
    assert answer.status_code == 200, (path, answer.text)
    assert answer.headers["cache-control"] == "no-store"
    assert "<html" not in answer.text and "<nav" not in answer.text  # the part alone
    return answer.text


def _tile(part: str, label: str) -> int:
    found = re.search(rf'<span class="figure">(\d+)</span><span class="label">{label}', part)
    assert found, part
    return int(found.group(1))


async def test_each_list_page_answers_its_live_part_alone(console: Console) -> None:
    ops = await console.key("ops", ["read", "operate"])
    async with console.browser() as http:
        await sign_in(http, ops)
        for path, name in LIVE_PAGES.items():
            whole = await http.get(path)
            assert whole.status_code == 200
            # Without script the page is complete: its live part is in it, marked.
            assert f'data-live="{name}"' in whole.text and "<html" in whole.text
            assert 'script src="/ui/static/console.js' in whole.text
            await _part(http, path, name)
            other = await http.get(path, headers={"X-Herald-Fragment": "nothing"})
            assert other.status_code == 404
        script = await http.get("/ui/static/console.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        assert "X-Herald-Fragment" in script.text


async def test_live_parts_follow_the_engine_and_the_pages_filters(console: Console) -> None:
    ops = await console.key("ops", ["read", "operate"])
    async with console.browser() as http:
        await sign_in(http, ops)
        before = await _part(http, "/ui/", "overview")
        assert _tile(before, "waiting") == 0
        first = await console.client.enqueue("echo", {"n": 1}, key="first-order")
        second = await console.client.enqueue("echo", {"n": 2}, key="second-order")
        after = await _part(http, "/ui/", "overview")
        assert _tile(after, "waiting") == 2
        assert ">default</a></h3>" in after  # the queue appeared

        waiting = await _part(http, "/ui/jobs?state=waiting", "jobs")
        assert "first-order" in waiting and "second-order" in waiting
        by_key = await _part(http, "/ui/jobs?key=second-order", "jobs")
        assert "second-order" in by_key and "first-order" not in by_key

        dead = await console.client.enqueue("permanent", {}, key="broken-feed")
        assert "No dead letter matches" in await _part(http, "/ui/dead-letters", "dead")
        async with running_worker(console.settings, concurrency=2):
            for job_id in (first.id, second.id, dead.id):
                await wait_for_job(console.client, job_id)
        letters = await _part(http, "/ui/dead-letters", "dead")
        assert "broken-feed" in letters and 'name="target"' in letters
        assert "broken-feed" not in await _part(http, "/ui/dead-letters?kind=echo", "dead")
        finished = await _part(http, "/ui/", "overview")
        assert _tile(finished, "waiting") == 0 and _tile(finished, "dead letters") == 1
        assert "2 succeeded and 1 died in the last 1h" in finished
        assert "waiting" not in await _part(http, "/ui/jobs?state=waiting", "jobs")

        async with console.client.pool.connection() as conn:
            schedule = await create_schedule(
                conn, ScheduleSpec("noop", "nightly-export", "daily", "UTC", at=dt.time(3))
            )
        assert "nightly-export" in await _part(http, "/ui/schedules", "schedules")
        assert "No audit record matches" in await _part(http, "/ui/audit", "audit")
        review = await http.get(f"/ui/actions/schedule.pause?target={schedule.id}")
        assert review.status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', review.text)
        assert csrf
        done = await http.post(
            "/ui/actions/schedule.pause/run",
            data={"csrf": csrf.group(1), "target": str(schedule.id), "reason": "freeze"},
        )
        assert done.status_code == 303
        audit_part = await _part(http, "/ui/audit", "audit")
        assert "freeze" in audit_part and "pause" in audit_part
        assert "paused" in await _part(http, "/ui/schedules", "schedules")


async def test_a_reader_s_live_parts_carry_no_action(console: Console) -> None:
    viewer = await console.key("viewer", ["read"])
    await console.client.enqueue("permanent", {}, key="broken-feed")
    async with running_worker(console.settings, concurrency=1):
        await wait_for_job(console.client, (await console.client.list_jobs())[0].id)
    async with console.browser() as http:
        await sign_in(http, viewer)
        letters = await _part(http, "/ui/dead-letters", "dead")
        assert "broken-feed" in letters
        assert 'name="target"' not in letters and "/actions/" not in letters
