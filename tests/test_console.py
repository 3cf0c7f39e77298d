"""The operator console over HTTP against a real database: sign-in and sessions, CSRF,
scopes, reviewed and audited actions, pages, and the page registry of applications.

The same console is driven in a real browser by ``test_console_browser.py``.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import pytest
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.api import ApiSettings, create_app, revoke_key
from herald.api.auth import hash_token
from herald.client import Client, open_connection
from herald.config import Settings
from herald.console import (
    Caller,
    ConsoleError,
    ConsoleExtension,
    NavEntry,
    Review,
    Signed,
    install,
    render,
)
from herald.console.registry import Action, Registry, discover
from herald.ops import audit
from herald.schedules import ScheduleSpec, create_schedule
from tests.console_kit import CSRF, Console, open_console, sign_in
from tests.support import APP, running_worker, wait_for_job


@pytest.fixture
async def console(settings: Settings) -> AsyncIterator[Console]:
    async with open_console(settings) as found:
        yield found


async def _dead_letter(console: Console, kind: str = "permanent", key: str = "doc") -> int:
    """Let a job of ``kind`` die under a real worker; returns its dead letter's id."""
    job = await console.client.enqueue(kind, {"gate": "missing"}, key=key)
    async with running_worker(console.settings, concurrency=2):
        row = await wait_for_job(console.client, job.id)
    assert row["state"] == "dead", row
    found = await console.rows("SELECT id FROM dead_letters WHERE job_id = %s", job.id)
    return int(found[0]["id"])


# --- signing in ---------------------------------------------------------------------------


async def test_signing_in_sets_a_strict_http_only_session_that_signing_out_ends(
    console: Console,
) -> None:
    token = await console.key("ops", ["read", "operate"])
    async with console.browser() as http:
        first = await http.get("/ui/jobs?state=dead")
        assert first.status_code == 303
        assert first.headers["location"] == "/ui/signin?next=/jobs%3Fstate%3Ddead"
        form = await http.get(first.headers["location"])
        csrf = CSRF.search(form.text)
        assert csrf
        signed = await http.post(
            "/ui/signin", data={"csrf": csrf.group(1), "api_key": token, "next": "/jobs"}
        )
        assert signed.status_code == 303 and signed.headers["location"] == "/ui/jobs"
        cookie = next(
            c for c in signed.headers.get_list("set-cookie") if c.startswith("herald_session=")
        )
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/ui", "max-age=28800"} <= attributes
        assert "secure" not in attributes  # plain http here; over https see below
        session = cookie.split(";")[0].split("=", 1)[1]
        stored = await console.rows("SELECT token_hash, api_key_id FROM console_sessions")
        assert [r["token_hash"] for r in stored] == [hash_token(session)]  # never the token

        page = await http.get("/ui/jobs")
        assert page.status_code == 200 and "Signed in as <strong>ops</strong>" in page.text
        assert page.headers["cache-control"] == "no-store"
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        found = CSRF.search(page.text)
        assert found
        out = await http.post("/ui/signout", data={"csrf": found.group(1)})
        assert out.status_code == 303 and out.headers["location"] == "/ui/signin"
        assert await console.rows("SELECT * FROM console_sessions") == []
        again = await http.get("/ui/jobs")
        assert again.status_code == 303
        # The old cookie is of no use either, even presented by hand.
    async with console.browser(Cookie=f"herald_session={session}") as stale:
        assert (await stale.get("/ui/jobs")).status_code == 303


async def test_over_https_the_session_cookie_is_secure(console: Console) -> None:
    token = await console.key("ops", ["read"])
    async with console.browser("https://herald.test") as http:
        form = await http.get("/ui/signin")
        csrf = CSRF.search(form.text)
        assert csrf
        signed = await http.post("/ui/signin", data={"csrf": csrf.group(1), "api_key": token})
        assert signed.status_code == 303
        cookie = next(
            c for c in signed.headers.get_list("set-cookie") if c.startswith("herald_session=")
        )
        assert "secure" in cookie.lower()


async def test_unknown_revoked_and_scope_less_keys_cannot_sign_in(console: Console) -> None:
    submitter = await console.key("submitter", ["submit"])
    async with console.browser() as http:
        form = await http.get("/ui/signin")
        match = CSRF.search(form.text)
        assert match
        csrf = match.group(1)
        wrong = await http.post("/ui/signin", data={"csrf": csrf, "api_key": "hrld_nope"})
        assert wrong.status_code == 401 and "unknown or has been revoked" in wrong.text
        scope = await http.post("/ui/signin", data={"csrf": csrf, "api_key": submitter})
        assert scope.status_code == 403 and "lacks the read scope" in scope.text
        # The sign-in form itself is protected: no token, another site, or a stale token.
        bare = await http.post("/ui/signin", data={"api_key": submitter})
        assert bare.status_code == 403
        elsewhere = await http.post(
            "/ui/signin",
            data={"csrf": csrf, "api_key": submitter},
            headers={"Origin": "https://evil.example"},
        )
        assert elsewhere.status_code == 403
    assert await console.rows("SELECT * FROM console_sessions") == []


async def test_revoking_the_key_or_expiry_ends_its_sessions_at_once(console: Console) -> None:
    token = await console.key("ops", ["read"])
    async with console.browser() as http:
        await sign_in(http, token)
        async with await open_connection(console.settings) as conn:
            assert await revoke_key(conn, "ops")
        assert (await http.get("/ui/")).status_code == 303
        fragment = await http.get("/ui/", headers={"X-Herald-Fragment": "overview"})
        assert fragment.status_code == 401  # the page's script then reloads to sign in
    token = await console.key("ops", ["read"])
    async with console.browser() as http:
        await sign_in(http, token)
        await console.rows(
            "UPDATE console_sessions SET created_at = herald_now() - interval '9 hours', "
            "expires_at = herald_now() - interval '1 hour' RETURNING 1"
        )
        assert (await http.get("/ui/")).status_code == 303


# --- CSRF and scopes ----------------------------------------------------------------------


async def test_a_state_changing_request_needs_this_sessions_csrf_token(
    console: Console,
) -> None:
    ops = await console.key("ops", ["read", "operate"])
    job = await console.client.enqueue("noop", run_at=None, key="k")
    async with console.browser() as http, console.browser() as other:
        csrf = await sign_in(http, ops)
        other_csrf = await sign_in(other, ops)
        url = "/ui/actions/job.cancel/run"
        body = {"target": str(job.id), "reason": "forged"}
        assert (await http.post(url, data=body)).status_code == 403
        assert (await http.post(url, data={**body, "csrf": other_csrf})).status_code == 403
        assert (await http.post(url, data={**body, "csrf": "x" * 43})).status_code == 403
        evil = await http.post(
            url, data={**body, "csrf": csrf}, headers={"Origin": "https://evil.example"}
        )
        assert evil.status_code == 403
        cross = await http.post(
            url, data={**body, "csrf": csrf}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403
        as_json = await http.post(url, json={**body, "csrf": csrf})
        assert as_json.status_code == 415
    row = await console.client.get_job(job.id)
    assert row is not None and row.state == "waiting"
    assert await audit.entries(console.client.pool) == []


async def test_every_state_changing_console_route_refuses_a_post_without_csrf(
    console: Console,
) -> None:
    """Whatever routes the console and its extensions have: no token, no change."""
    token = await console.key("admin", ["admin"])
    mounted = next(r for r in console.app.routes if getattr(r, "path", "") == "/ui")
    registry = mounted.app.state.registry  # type: ignore[attr-defined]
    posts = [path for method, path, _ in registry.routes() if method not in ("GET", "HEAD")]
    assert "/actions/{name}/run" in posts and "/signout" in posts
    async with console.browser() as http:
        await sign_in(http, token)
        for path in posts:
            url = "/ui" + re.sub(r"\{[^}]+\}", "job.cancel", path)
            answer = await http.post(url, data={"target": "1", "reason": "r"})
            assert answer.status_code == 403, (path, answer.status_code)


async def test_a_read_key_sees_no_action_and_its_forged_posts_are_refused(
    console: Console,
) -> None:
    viewer = await console.key("viewer", ["read"])
    dead_id = await _dead_letter(console)
    waiting = await console.client.enqueue("noop", key="w")
    schedule = await create_schedule(
        console.client.pool,
        ScheduleSpec("noop", "nightly", "daily", "UTC", at=__import__("datetime").time(3)),
    )
    async with console.browser() as http:
        csrf = await sign_in(http, viewer)
        pages = {
            "/ui/dead-letters": ("Replay selected", 'name="target"'),
            f"/ui/dead-letters/{dead_id}": ("Replay…", "Discard…"),
            f"/ui/jobs/{waiting.id}": ("Cancel…", "Retry now…"),
            "/ui/schedules": ("Pause…", "/edit"),
            f"/ui/schedules/{schedule.id}": ("Pause…", "Edit…"),
        }
        for url, absent in pages.items():
            page = await http.get(url)
            assert page.status_code == 200, url
            for text in absent:
                assert text not in page.text, (url, text)
        dead_page = await http.get(f"/ui/dead-letters/{dead_id}")
        assert "upstream" not in dead_page.text or "Traceback" not in dead_page.text
        assert "Tracebacks are shown to keys with the operate scope" in dead_page.text
        assert "Traceback (most recent call last)" not in dead_page.text
        review = await http.get(f"/ui/actions/dead_letter.replay?target={dead_id}")
        assert review.status_code == 403
        assert "lacks the 'operate' scope" in html.unescape(review.text)
        edit = await http.get(f"/ui/schedules/{schedule.id}/edit")
        assert edit.status_code == 403
        for name, target in (
            ("dead_letter.replay", dead_id),
            ("dead_letter.discard", dead_id),
            ("job.cancel", waiting.id),
            ("schedule.pause", schedule.id),
        ):
            forged = await http.post(
                f"/ui/actions/{name}/run",
                data={"csrf": csrf, "target": str(target), "reason": "forged", "force": "on"},
            )
            assert forged.status_code == 403, name
    assert await audit.entries(console.client.pool) == []
    assert (await console.rows("SELECT count(*) AS n FROM dead_letters"))[0]["n"] == 1
    assert (await console.rows("SELECT paused FROM schedules"))[0]["paused"] is False


async def test_operators_see_the_last_traceback(console: Console) -> None:
    ops = await console.key("ops", ["read", "operate"])
    dead_id = await _dead_letter(console)
    async with console.browser() as http:
        await sign_in(http, ops)
        page = await http.get(f"/ui/dead-letters/{dead_id}")
        assert "Traceback (most recent call last)" in page.text
        assert "this request can never succeed" in page.text


# --- actions ------------------------------------------------------------------------------


async def test_replay_is_reviewed_needs_a_reason_and_lands_in_the_audit_log(
    console: Console,
) -> None:
    ops = await console.key("ops", ["read", "operate"])
    dead_id = await _dead_letter(console, "permanent", "report-7")
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        review = await http.get(f"/ui/actions/dead_letter.replay?target={dead_id}")
        assert review.status_code == 200
        assert "What will happen" in review.text
        assert "Enqueue a new permanent/report-7 job on queue default" in review.text
        assert 'name="reason"' in review.text and "required" in review.text
        run = "/ui/actions/dead_letter.replay/run"
        blank = await http.post(run, data={"csrf": csrf, "target": str(dead_id), "reason": " "})
        assert blank.status_code == 422 and "every action needs a reason" in blank.text
        assert await console.rows("SELECT id FROM jobs WHERE replay_of IS NOT NULL") == []
        done = await http.post(
            run, data={"csrf": csrf, "target": str(dead_id), "reason": "upstream fixed"}
        )
        assert done.status_code == 303
        assert done.headers["location"] == f"/ui/dead-letters/{dead_id}"
        page = await http.get(done.headers["location"])
        replay = await console.rows("SELECT id, replay_of FROM jobs WHERE replay_of IS NOT NULL")
        assert len(replay) == 1
        assert f"dead letter {dead_id} replayed as job {replay[0]['id']}" in page.text
        assert "Reason recorded: “upstream fixed”" in page.text
        # Shown once: the next page has no message.
        assert "Reason recorded" not in (await http.get("/ui/dead-letters")).text
        log = await http.get("/ui/audit?actor=ops")
        assert "upstream fixed" in log.text and "replay" in log.text
    entries = await audit.entries(console.client.pool)
    assert [(e.actor, e.action, e.target_id, e.reason) for e in entries] == [
        ("ops", "replay", str(dead_id), "upstream fixed")
    ]


async def test_bulk_discard_leaves_pending_cleanups_unless_forced(console: Console) -> None:
    ops = await console.key("ops", ["operate", "read"])
    first = await _dead_letter(console, "permanent", "a")
    second = await _dead_letter(console, "permanent", "b")
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        review = await http.get(f"/ui/actions/dead_letter.discard?target={first}&target={second}")
        assert "Discard 2 dead letters" in review.text
        assert review.text.count("Its cleanup is still pending") == 2
        assert 'name="force"' in review.text
        data = {"csrf": csrf, "target": [str(first), str(second)], "reason": "noise"}
        kept = await http.post("/ui/actions/dead_letter.discard/run", data=data)
        assert kept.status_code == 303
        page = await http.get(kept.headers["location"])
        assert "0 done, 2 refused" in page.text and "still has a pending cleanup" in page.text
        assert len(await console.rows("SELECT id FROM dead_letters")) == 2
        forced = await http.post(
            "/ui/actions/dead_letter.discard/run", data={**data, "force": "on"}
        )
        assert forced.status_code == 303
    assert await console.rows("SELECT id FROM dead_letters") == []
    entries = await audit.entries(console.client.pool)
    assert sorted(e.target_id for e in entries) == sorted([str(first), str(second)])
    assert all(e.after == {"cleanup_abandoned": True} for e in entries)


async def test_a_schedule_edit_shows_each_change_before_it_is_saved(console: Console) -> None:
    import datetime as dt

    ops = await console.key("ops", ["read", "operate"])
    schedule = await create_schedule(
        console.client.pool, ScheduleSpec("noop", "nightly", "daily", "UTC", at=dt.time(3))
    )
    sid = schedule.id
    fields = {
        "frequency": "daily",
        "timezone": "Europe/Brussels",
        "at": "04:30",
        "weekday": "3",  # not used by a daily rule: dropped
        "payload": '{"full": true}',
        "misfire": "once",
        "misfire_grace": "60",
        "max_catchup": "10",
    }
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        form = await http.get(f"/ui/schedules/{sid}/edit")
        assert form.status_code == 200 and 'name="frequency"' in form.text
        review = await http.post(
            "/ui/actions/schedule.update", data={"csrf": csrf, "target": str(sid), **fields}
        )
        assert review.status_code == 200, review.text
        for shown in ("03:00:00", "04:30:00", "Europe/Brussels", "re-timed", '{"full": true}'):
            assert shown in html.unescape(review.text), shown
        bad = await http.post(
            "/ui/actions/schedule.update",
            data={"csrf": csrf, "target": str(sid), **fields, "frequency": "cron", "cron": "x"},
        )
        assert "this edit cannot be saved" in bad.text and "Confirm" not in bad.text
        saved = await http.post(
            "/ui/actions/schedule.update/run",
            data={"csrf": csrf, "target": str(sid), **fields, "reason": "local mornings"},
        )
        assert saved.status_code == 303 and saved.headers["location"] == f"/ui/schedules/{sid}"
        page = await http.get(saved.headers["location"])
        assert "daily at 04:30 (Europe/Brussels)" in page.text and "local mornings" in page.text
    row = (await console.rows("SELECT * FROM schedules"))[0]
    assert row["timezone"] == "Europe/Brussels" and row["at_time"] == dt.time(4, 30)
    assert row["weekday"] is None and row["payload"] == {"full": True}
    entries = await audit.entries(console.client.pool, target_type="schedule")
    assert [(e.action, e.reason) for e in entries] == [("update", "local mornings")]


# --- pages --------------------------------------------------------------------------------


async def test_overview_draws_throughput_and_failures_per_queue(console: Console) -> None:
    ops = await console.key("ops", ["read"])
    for index in range(3):
        await console.client.enqueue("echo", {"n": index})
    await console.client.enqueue("fail", {}, key="flaky")
    job = await console.client.enqueue("permanent", {}, key="p")
    async with running_worker(console.settings, concurrency=4):
        await wait_for_job(console.client, job.id)
        await wait_for_job(console.client, (await console.client.list_jobs(kind="fail"))[0].id)
    async with console.browser() as http:
        await sign_in(http, ops)
        page = await http.get("/ui/")
        assert page.status_code == 200
        text = page.text
        assert "3 succeeded and 2 died in the last 1h" in text
        # 3 successes, 4 failed attempts (3 of "fail", 1 of "permanent").
        assert "57.1% of attempts failed" in text and "4 failed attempts" in text
        assert text.count('class="bar"') >= 1 and 'class="bar bad"' in text
        assert 'role="img"' in text
        wide = await http.get("/ui/?window=24h")
        assert "last 24h" in wide.text
        bad = await http.get("/ui/?window=2y")
        assert bad.status_code == 422


async def test_jobs_filter_and_detail_show_lease_steps_rescues_and_stale_writes(
    console: Console,
) -> None:
    ops = await console.key("ops", ["read", "operate"])
    api = await console.key("partner", ["submit"])
    async with console.browser(Authorization=f"Bearer {api}") as http:
        submitted = await http.post("/v1/jobs", json={"kind": "echo", "key": "from-api"})
        assert submitted.status_code == 202
    piped = await console.client.enqueue("two_steps", {}, key="pipe")
    await console.rows(
        "UPDATE jobs SET state = 'running', attempt = 2, fence = 7, step = 'persist_data', "
        "checkpoint = '{\"files\": [\"f1\"]}', lease_owner = 'worker-a', "
        "attempted_at = herald_now(), "
        "lease_expires_at = herald_now() + interval '30 seconds' WHERE id = %s RETURNING 1",
        piped.id,
    )
    await console.rows(
        "INSERT INTO rescues (job_id, fence, owner, outcome) VALUES (%s, 6, 'worker-z', 'waiting')"
        " RETURNING 1",
        piped.id,
    )
    await console.rows(
        "INSERT INTO stale_writes (job_id, fence, operation, owner) "
        "VALUES (%s, 6, 'checkpoint', 'worker-z') RETURNING 1",
        piped.id,
    )
    async with console.browser() as http:
        await sign_in(http, ops)
        by_key = await http.get("/ui/jobs?api_key=partner")
        assert "from-api" in by_key.text and "pipe" not in by_key.text
        running = await http.get("/ui/jobs?state=running&within=1h")
        assert "two_steps" in running.text and "from-api" not in running.text
        later = await http.get("/ui/jobs?created_from=2999-01-01T00:00")
        assert "No job matches these filters" in later.text
        assert (await http.get("/ui/jobs?state=lost")).status_code == 422
        page = await http.get(f"/ui/jobs/{piped.id}")
        text = html.unescape(page.text)
        for shown in ("worker-a", "persist_data", "worker-z", "stale write refused",
                      "lease expired", "Cancel…", '"f1"'):  # fmt: skip
            assert shown in text, shown
        assert re.search(r"get_data <span class=\"badge done\">", text)
        assert re.search(r"persist_data <span class=\"badge running\">", text)
        fragment = await http.get(f"/ui/jobs/{piped.id}", headers={"X-Herald-Fragment": "job"})
        assert fragment.status_code == 200 and "<html" not in fragment.text
        assert "worker-a" in fragment.text
        assert (await http.get("/ui/jobs/999999")).status_code == 404
        assert (await http.get("/ui/jobs/abc")).status_code == 422


async def test_the_catalog_adds_its_pages_through_the_registry(console: Console) -> None:
    admin = await console.key("admin", ["admin"])
    spec = {
        "id": "air",
        "title": "Air quality",
        "description": "Hourly measures.",
        "publisher": {"name": "Office", "uri": "https://example.org/office"},
        "source": {"type": "generated", "count": 10},
    }
    async with console.browser(Authorization=f"Bearer {admin}") as api:
        assert (await api.post("/v1/datasets", json=spec)).status_code == 201
    async with console.browser() as http:
        await sign_in(http, admin)
        home = await http.get("/ui/")
        assert 'href="/ui/datasets"' in home.text
        listing = await http.get("/ui/datasets")
        assert "Air quality" in listing.text and 'href="/ui/datasets/air"' in listing.text
        page = await http.get("/ui/datasets/air")
        assert "Not published yet" in page.text and "generated" in page.text
        assert (await http.get("/ui/datasets/nope")).status_code == 404
        assert (await http.get("/ui/datasets/air/versions/1")).status_code == 404


async def test_ingestion_adds_its_page_through_the_registry(console: Console) -> None:
    from tests.ingest.harness import add_provider, open_conn, stage_snapshot

    admin = await console.key("admin", ["admin"])
    async with await open_conn(console.settings) as conn:
        await add_provider(conn, "acme", "http://127.0.0.1:9/feeds/acme")
        from herald.ingest.sandbox import SnapshotSpec

        run_id = await stage_snapshot(conn, "acme", SnapshotSpec(plans=20), 1)
    async with console.browser() as http:
        await sign_in(http, admin)
        assert 'href="/ui/ingestion"' in (await http.get("/ui/")).text
        page = await http.get("/ui/ingestion")
        assert page.status_code == 200 and "http://127.0.0.1:9/feeds/acme" in page.text
        assert f'href="/ui/ingestion/runs/{run_id}"' in page.text and "staged" in page.text


# --- the registry -------------------------------------------------------------------------


async def _greet_review(
    caller: Caller, targets: Sequence[str], params: Mapping[str, str]
) -> Review:
    return Review("Greet", [f"Say hello to {t}" for t in targets])


async def _greet(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> str:
    await audit.record(caller.state.client.pool, caller.name, "greet", ("friend", target), reason)
    return f"greeted {target}"


def _greeting(templates: Path) -> ConsoleExtension:
    router = APIRouter()

    @router.get("/greetings")
    async def greetings(request: Request, caller: Signed) -> Response:
        return await render(request, "greeting/hello.html", caller, name=caller.name)

    return ConsoleExtension(
        name="greeting",
        router=router,
        templates=templates,
        nav=(NavEntry("Greetings", "/greetings", scope="operate", order=70),),
        actions=(Action("friend.greet", "Greet", "operate", _greet_review, _greet, lambda t: "/"),),
    )


async def test_an_application_adds_pages_nav_and_audited_actions(
    settings: Settings, tmp_path: Path
) -> None:
    (tmp_path / "hello.html").write_text(
        '{% extends "base.html" %}{% block content %}<h1>Hello {{ name }}</h1>{% endblock %}'
    )
    app = create_app(APP, settings, ApiSettings())
    install(app, APP, extensions=[_greeting(tmp_path)])
    async with app.router.lifespan_context(app), await Client.open(APP, settings) as client:
        console = Console(app, settings, client)
        ops = await console.key("ops", ["read", "operate"])
        viewer = await console.key("viewer", ["read"])
        async with console.browser() as http:
            csrf = await sign_in(http, ops)
            page = await http.get("/ui/greetings")
            assert "<h1>Hello ops</h1>" in page.text and 'href="/ui/greetings"' in page.text
            review = await http.get("/ui/actions/friend.greet?target=ann")
            assert "Say hello to ann" in review.text
            done = await http.post(
                "/ui/actions/friend.greet/run",
                data={"csrf": csrf, "target": "ann", "reason": "birthday"},
            )
            assert done.status_code == 303
            assert "greeted ann" in (await http.get("/ui/")).text
        async with console.browser() as http:
            await sign_in(http, viewer)
            assert 'href="/ui/greetings"' not in (await http.get("/ui/")).text
        entries = await audit.entries(client.pool)
        assert [(e.action, e.target_id, e.reason) for e in entries] == [
            ("greet", "ann", "birthday")
        ]


def test_the_registry_refuses_clashing_or_malformed_extensions(tmp_path: Path) -> None:
    from herald.console.pages import core

    greeting = _greeting(tmp_path)
    with pytest.raises(ConsoleError, match="two console extensions"):
        Registry(core(), [greeting, greeting])
    clash = APIRouter()

    @clash.get("/jobs")
    async def jobs() -> None:
        return None

    with pytest.raises(ConsoleError, match="already engine's page"):
        Registry(core(), [ConsoleExtension("other", router=clash)])
    with pytest.raises(ConsoleError, match="name"):
        Registry(core(), [ConsoleExtension("Bad Name")])
    with pytest.raises(ConsoleError, match="navigation"):
        Registry(core(), [ConsoleExtension("x", nav=(NavEntry("X", "/x", scope="root"),))])
    assert [e.name for e in discover()] == ["catalog", "generations", "ingest", "social"]
