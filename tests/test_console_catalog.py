"""The catalog's actions in the console over HTTP against a real database: publish a
dataset and delete a version, each reviewed, reasoned, run as the catalog's job and
audited; a reader sees no such action and its forged run is refused.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from herald import Herald, Settings, Worker
from herald.api import ApiSettings, create_app
from herald.catalog.pipeline import close_embedded_store, register_catalog
from herald.catalog.publishing import CatalogSettings
from herald.client import Client
from herald.console import install
from herald.console.registry import discover
from herald.ops import audit
from tests.console_kit import CSRF, Console, sign_in
from tests.support import wait_for_job

SPEC = {
    "id": "air",
    "title": "Air quality",
    "description": "Hourly measures.",
    "publisher": {"name": "Office", "uri": "https://example.org/office"},
    "source": {"type": "generated", "count": 25},
}


@dataclass
class CatalogConsole(Console):
    herald: Herald = field(default_factory=Herald)


@pytest.fixture
async def console(settings: Settings, tmp_path: Path) -> AsyncIterator[CatalogConsole]:
    """The API and console of an application that runs the catalog."""
    settings = settings.with_(data_dir=tmp_path / "data")
    app = Herald()
    register_catalog(app, settings, CatalogSettings(public_url="https://data.example.org"))
    api = create_app(app, settings, ApiSettings())
    install(api, app, extensions=discover())
    try:
        async with api.router.lifespan_context(api), await Client.open(app, settings) as client:
            yield CatalogConsole(api, settings, client, app)
    finally:
        close_embedded_store(settings)


async def _run(console: CatalogConsole, job_id: int) -> str:
    """Run a worker of the catalog's application until job ``job_id`` ends."""
    worker = Worker(console.herald, settings=console.settings, concurrency=1)
    task = asyncio.create_task(worker.run())
    try:
        row = await wait_for_job(console.client, job_id, limit=60)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    return str(row["state"])


def _text(page: str) -> str:
    """The page's text, tags dropped and spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def test_publish_and_delete_a_version_reviewed_reasoned_and_audited(
    console: CatalogConsole,
) -> None:
    admin = await console.key("admin", ["admin"])
    ops = await console.key("ops", ["read", "operate"])
    async with console.browser(Authorization=f"Bearer {admin}") as api:
        assert (await api.post("/v1/datasets", json=SPEC)).status_code == 201
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        page = await http.get("/ui/datasets/air")
        assert 'href="/ui/actions/dataset.publish?target=air"' in page.text
        review = await http.get("/ui/actions/dataset.publish?target=air&target=nope")
        said = _text(review.text)
        assert "Publish a new version of dataset air (Air quality)" in said
        assert "validate the entry against the basic tier" in said
        assert "no dataset 'nope' is registered" in said
        no_reason = await http.post(
            "/ui/actions/dataset.publish/run", data={"csrf": csrf, "target": "air", "reason": ""}
        )
        assert no_reason.status_code == 422 and "every action needs a reason" in no_reason.text
        done = await http.post(
            "/ui/actions/dataset.publish/run",
            data={"csrf": csrf, "target": "air", "reason": "source corrected"},
        )
        assert done.status_code == 303 and done.headers["location"] == "/ui/datasets/air"
        outcome = _text((await http.get("/ui/datasets/air")).text)
        found = re.search(r"dataset air: version 1 requested \(job (\d+)\)", outcome)
        assert found, outcome
        assert await _run(console, int(found.group(1))) == "succeeded"

        version = await http.get("/ui/datasets/air/versions/1")
        assert "Delete this version…" in version.text
        again = _text((await http.get("/ui/actions/dataset.publish?target=air")).text)
        assert "today version 1" in again
        said = _text((await http.get("/ui/actions/dataset_version.delete?target=air/1")).text)
        assert "Delete version 1 of dataset air: remove its" in said
        assert "the entry goes back to the latest other published version" in said
        done = await http.post(
            "/ui/actions/dataset_version.delete/run",
            data={"csrf": csrf, "target": "air/1", "reason": "published by mistake"},
        )
        assert done.headers["location"] == "/ui/datasets/air/versions/1"
        outcome = _text((await http.get("/ui/datasets/air/versions/1")).text)
        deleting = re.search(r"air/1: deletion requested \(job (\d+)\)", outcome)
        assert deleting, outcome
        assert await _run(console, int(deleting.group(1))) == "succeeded"
        gone = _text((await http.get("/ui/datasets/air/versions/1")).text)
        assert "deleted" in gone and "Delete this version" not in gone
        refused = _text((await http.get("/ui/actions/dataset_version.delete?target=air/1")).text)
        assert "air/1 is deleted: only a published or failed version" in refused
        history = _text((await http.get("/ui/datasets/air")).text)
        assert "publish by ops: “source corrected”" in history
        assert "delete version by ops: “published by mistake”" in history

    entries = await audit.entries(console.client.pool, actor="ops")
    assert [(e.actor, e.action, e.target_id, e.reason) for e in entries] == [
        ("ops", "delete_version", "air", "published by mistake"),
        ("ops", "publish", "air", "source corrected"),
    ]


async def test_a_reader_sees_no_catalog_action_and_cannot_forge_one(
    console: CatalogConsole,
) -> None:
    admin = await console.key("admin", ["admin"])
    viewer = await console.key("viewer", ["read"])
    async with console.browser(Authorization=f"Bearer {admin}") as api:
        assert (await api.post("/v1/datasets", json=SPEC)).status_code == 201
    async with console.browser() as http:
        await sign_in(http, viewer)
        page = await http.get("/ui/datasets/air")
        assert page.status_code == 200 and "/actions/" not in page.text
        assert (await http.get("/ui/actions/dataset.publish?target=air")).status_code == 403
        match = CSRF.search(page.text)
        assert match
        forged = await http.post(
            "/ui/actions/dataset.publish/run",
            data={"csrf": match.group(1), "target": "air", "reason": "forged"},
        )
        assert forged.status_code == 403
    assert await audit.entries(console.client.pool, actor="viewer") == []
    assert await console.client.list_jobs() == []
