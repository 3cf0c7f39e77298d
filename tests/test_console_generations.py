"""Generations in the console over HTTP against a real database: datasets, a partition as
its operator sees it (current generation, candidates with the coordinator's reasons,
tasks with lease and fence, quarantine, late sources, consumers, backfills), lineage both
ways, and the safe actions, each reviewed, reasoned, audited, scoped; a reader sees no
action and a forged one is refused.

The partition is built by the generations application itself, on an in-process worker
(see ``tests/generations/console_scene.py``).
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from herald.api import ApiSettings, create_app
from herald.client import Client
from herald.config import Settings
from herald.console import install
from herald.console.registry import discover
from herald.db import AsyncConn, connect, conninfo
from herald.generations import sample
from herald.generations.runtime import Generations
from herald.generations.store import ROOT_VARIABLE
from herald.ops import audit
from herald.ops.crypto import TokenCipher
from tests.console_kit import CSRF, Console, open_console, sign_in
from tests.generations.console_scene import Scene, build_scene
from tests.generations.helpers import PARTITION, setup
from tests.test_console_a11y import _problems

PAGE = f"/ui/generations/orders/partitions/{PARTITION}"


@pytest.fixture
async def scene_console(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Console, Scene]]:
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "store"))
    monkeypatch.setenv("HERALD_TOKEN_KEYS", TokenCipher.generate_key())  # webhook secrets
    gens: Generations = sample.gens
    gens.use(settings)
    assert settings.database_url is not None
    conn: AsyncConn = await connect(conninfo(settings.database_url, settings.schema))
    async with conn:
        await setup(gens, conn)
        scene = await build_scene(gens, conn, settings)
    api = create_app(gens.app, settings, ApiSettings())
    install(api, gens.app, extensions=discover())
    async with api.router.lifespan_context(api), await Client.open(gens.app, settings) as client:
        yield Console(api, settings, client), scene


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def test_a_partition_its_lineage_and_a_reviewed_audited_action(
    scene_console: tuple[Console, Scene],
) -> None:
    console, scene = scene_console
    ops = await console.key("ops", ["read", "operate"])
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        assert 'href="/ui/generations"' in (await http.get("/ui/")).text
        listing = _text((await http.get("/ui/generations")).text)
        assert "orders team-orders" in listing
        dataset = _text((await http.get("/ui/generations/orders")).text)
        assert PARTITION in dataset and "definition v18 rebuilt July" in dataset

        page = (await http.get(PAGE)).text
        said = _text(page)
        for shown in (
            "generation 2 (correction)",  # the pointer
            f"run {scene.repair_run}",
            "base current: planned against generation 0",  # why the first was chosen
            # why the others were not: a late input, each run's own policy
            "missing input: accepted manifests",
            "the run's policy is to discard",
            "the run's policy is to wait",
            # the candidate with no rows of the day, refused by the checks
            "checks failed: pre-publication checks failed",
            f"Input {scene.misfiled} from shop-export",  # a late source
            "bad record",  # quarantined input
            "finance-warehouse",  # the consumer, its delivery pending
            "generation.published (generation 1)",
            "generation.corrected (generation 2)",
            "0 of 1 partitions",  # the backfill's progress
        ):
            assert shown in said, shown
        # The backfill's task is queued: lease and fence shown, skip offered.
        assert f"Skip run {scene.backfill_run}'s task…" in page
        assert f"Retry run {scene.quarantined_run}'s task…" in page
        target = f"orders/{PARTITION}/{scene.waiting_candidate}"
        assert f"/ui/actions/gen_candidate.discard?target={target}" in page
        assert "gen_candidate.override" not in page  # override needs admin
        # The rejected candidate offers nothing.
        assert f"candidate {scene.rejected_candidate}…" not in page
        live = await http.get(PAGE, headers={"X-Herald-Fragment": "partition"})
        assert live.status_code == 200 and "<html" not in live.text and "generation 2" in live.text

        lineage_page = (await http.get(f"{PAGE}/generations/2")).text
        lineage = _text(lineage_page)
        for shown in (
            "Generation 2 of orders/2026-07-14 current",
            "Change correction of",
            f"run {scene.repair_run} (repair, policy wait)",
            "Definition v18",
            f"Replaced generation 1 (inputs {scene.first})",
            f"added: {scene.late}; dropped: none",
            "Rows 13",
            "unique:order_id passed",
            "sha256:",
        ):
            assert shown in lineage, shown
        assert f'href="/ui/generations/inputs/{scene.late}"' in lineage_page
        first = _text((await http.get(f"{PAGE}/generations/1")).text)
        assert "Replaced by generation 2" in first and "nothing: the partition's first" in first
        used = _text((await http.get(f"/ui/generations/inputs/{scene.first}")).text)
        assert f"Generation 1 of {PARTITION}" in used and f"Generation 2 of {PARTITION}" in used
        for run in (scene.published_run, scene.discarded_run, scene.waiting_run):
            assert f"Run {run} for {PARTITION}" in used
        late = _text((await http.get(f"/ui/generations/inputs/{scene.late}")).text)
        assert f"Generation 2 of {PARTITION}" in late and "Generation 1 of" not in late
        run_page = _text((await http.get(f"/ui/generations/runs/{scene.waiting_run}")).text)
        assert "delayed" in run_page and "the run's policy is to wait" in run_page
        assert (await http.get(f"/ui/generations/backfills/{scene.backfill}")).status_code == 200
        assert (await http.get(f"{PAGE}/generations/7")).status_code == 404
        assert (await http.get("/ui/generations/nope")).status_code == 404
        assert (await http.get("/ui/generations/orders/partitions/..%2Fx")).status_code in (
            404,
            422,
        )

        review = _text((await http.get(f"/ui/actions/gen_candidate.discard?target={target}")).text)
        assert f"Discard candidate {scene.waiting_candidate} of orders/{PARTITION}" in review
        assert "it will never be published" in review
        # Without a reason nothing happens.
        again = await http.post(
            "/ui/actions/gen_candidate.discard/run",
            data={"csrf": csrf, "target": target, "reason": ""},
        )
        assert again.status_code == 422
        done = await http.post(
            "/ui/actions/gen_candidate.discard/run",
            data={"csrf": csrf, "target": target, "reason": "superseded by the repair"},
        )
        assert done.status_code == 303 and done.headers["location"] == PAGE
        after = _text((await http.get(PAGE)).text)
        assert f"candidate {scene.waiting_candidate}: discard (discarded by an operator)" in after
        assert "by ops: “superseded by the repair”" in after  # the manual actions
        # Once settled, the same action is refused with the reason.
        twice = await http.post(
            "/ui/actions/gen_candidate.discard/run",
            data={"csrf": csrf, "target": target, "reason": "once more"},
        )
        assert twice.status_code == 303
        assert "is discarded, not waiting" in _text((await http.get(PAGE)).text)
        # A target naming another partition's candidate is not found.
        elsewhere = f"orders/2026-07-15/{scene.rejected_candidate}"
        wrong = _text(
            (await http.get(f"/ui/actions/gen_candidate.discard?target={elsewhere}")).text
        )
        assert f"candidate {elsewhere} does not exist" in wrong
        odd = _text((await http.get("/ui/actions/gen_candidate.discard?target=orders/../3")).text)
        assert "candidate orders/../3 does not exist" in odd

        skip = f"orders/{PARTITION}/{scene.backfill_run}"
        skipped = await http.post(
            "/ui/actions/gen_task.skip/run",
            data={"csrf": csrf, "target": skip, "reason": "the backfill is not needed"},
        )
        assert skipped.status_code == 303
        assert "0 of 1 partitions" not in _text((await http.get(PAGE)).text)

    [entry] = await audit.entries(console.client.pool, target_type="gen_candidate")
    assert (entry.actor, entry.action, entry.reason) == (
        "ops",
        "generations.discard",
        "superseded by the repair",
    )
    assert entry.target_id == str(scene.waiting_candidate)
    [skip_entry] = await audit.entries(console.client.pool, target_type="gen_run_partition")
    assert skip_entry.reason == "the backfill is not needed"


async def test_quarantine_actions_override_for_admin_and_nothing_for_a_reader(
    scene_console: tuple[Console, Scene],
) -> None:
    console, scene = scene_console
    lead = await console.key("lead", ["admin"])
    ops = await console.key("ops", ["read", "operate"])
    viewer = await console.key("viewer", ["read"])
    item = f"orders/{PARTITION}/{scene.held_item}"
    async with console.browser() as http:
        csrf = await sign_in(http, lead)
        page = (await http.get(PAGE)).text
        assert "gen_candidate.override" in page and "gen_quarantine.replay" in page
        review = _text((await http.get(f"/ui/actions/gen_quarantine.replay?target={item}")).text)
        assert f"declare a repair run of {PARTITION}" in review
        done = await http.post(
            "/ui/actions/gen_quarantine.replay/run",
            data={"csrf": csrf, "target": item, "reason": "the shop fixed the export"},
        )
        assert done.status_code == 303
        said = _text((await http.get(PAGE)).text)
        assert re.search(rf"item {scene.held_item}: replayed as repair run \d+", said), said
        assert await _accessibility_problems(http, scene) == []

        waiting = f"orders/{PARTITION}/{scene.waiting_candidate}"
        review = _text(
            (await http.get(f"/ui/actions/gen_candidate.override?target={waiting}")).text
        )
        assert "despite the coordinator's rules" in review and "checks" in review
        done = await http.post(
            "/ui/actions/gen_candidate.override/run",
            data={"csrf": csrf, "target": waiting, "reason": "finance needs it now"},
        )
        assert done.status_code == 303
        said = _text((await http.get(PAGE)).text)
        assert (
            f"candidate {scene.waiting_candidate}: publish (published by an operator override): "
            "generation 3"
        ) in said, said

    async with console.browser() as http:  # override needs admin, even forged
        csrf = await sign_in(http, ops)
        forged = await http.post(
            "/ui/actions/gen_candidate.override/run",
            data={"csrf": csrf, "target": waiting, "reason": "forged"},
        )
        assert forged.status_code == 403

    async with console.browser() as http:
        await sign_in(http, viewer)
        # the operator's view of a partition needs operate, as in the API
        refused = await http.get(PAGE)
        assert refused.status_code == 403 and "operate" in _text(refused.text)
        page = (await http.get("/ui/generations/orders")).text
        assert "/actions/" not in page
        assert PARTITION in page and f'/partitions/{PARTITION}">' not in page  # no dead link
        forged = await http.post(
            "/ui/actions/gen_candidate.discard/run",
            data={
                "csrf": CSRF.findall(page)[0],
                "target": f"orders/{PARTITION}/{scene.waiting_candidate}",
                "reason": "forged",
            },
        )
        assert forged.status_code == 403
    entries = await audit.entries(console.client.pool, target_type="gen_quarantine")
    assert [(e.actor, e.reason) for e in entries] == [("lead", "the shop fixed the export")]
    [override] = await audit.entries(console.client.pool, target_type="gen_candidate")
    assert (override.actor, override.action, override.reason) == (
        "lead",
        "generations.override",
        "finance needs it now",
    )


async def _accessibility_problems(http: httpx.AsyncClient, scene: Scene) -> list[str]:
    """Every generations page and review, read as test_console_a11y reads the others."""
    candidate = f"orders/{PARTITION}/{scene.waiting_candidate}"
    pages = [
        "/ui/generations", "/ui/generations/orders", PAGE, f"{PAGE}/generations/2",
        f"/ui/generations/inputs/{scene.first}", f"/ui/generations/runs/{scene.waiting_run}",
        f"/ui/generations/backfills/{scene.backfill}",
        f"/ui/actions/gen_candidate.publish?target={candidate}",
        f"/ui/actions/gen_candidate.override?target={candidate}",
        f"/ui/actions/gen_task.retry?target=orders/{PARTITION}/{scene.quarantined_run}",
        f"/ui/actions/gen_task.skip?target=orders/{PARTITION}/{scene.backfill_run}",
    ]  # fmt: skip
    problems: list[str] = []
    for path in pages:
        answer = await http.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        problems += _problems(path, answer.text)
    return problems


async def test_a_deployment_without_generations_shows_none(settings: Settings) -> None:
    async with open_console(settings) as console:
        ops = await console.key("ops", ["read", "operate"])
        async with console.browser() as http:
            await sign_in(http, ops)
            assert "/ui/generations" not in (await http.get("/ui/")).text
            assert (await http.get("/ui/generations")).status_code == 404
