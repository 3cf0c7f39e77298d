"""Accessibility of every console page, read from the HTML it serves: each form control
has a label, each link, button and chart a name, ids are unique, each page has a
language, one main heading and a way past the navigation.

What needs a browser (keyboard focus, computed contrast, the phone layout) is checked in
Chromium by ``test_console_browser_a11y.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from herald.config import Settings
from herald.ops.crypto import TokenCipher
from herald.schedules import ScheduleSpec, create_schedule
from tests.console_kit import Console, open_console, sign_in
from tests.support import running_worker, wait_for_job
from tests.test_console_apps import ingestion_scene, social_scene

# Controls a person fills in or operates (hidden inputs and buttons are named otherwise).
_FILLED = {"input", "select", "textarea"}
_UNLABELLED_TYPES = {"hidden", "submit", "button", "reset", "image"}


@dataclass
class _Element:
    tag: str
    attrs: dict[str, str]
    text: list[str] = field(default_factory=list)
    in_label: bool = False


class _Page(HTMLParser):
    """The facts the checks need, gathered in one pass over a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lang: str | None = None
        self.ids: list[str] = []
        self.label_for: set[str] = set()
        self.controls: list[_Element] = []
        self.named: list[_Element] = []  # links and buttons: need text or a label
        self.charts: list[_Element] = []
        self.h1 = 0
        self.skip_link = False
        self._open: list[_Element] = []  # links/buttons being read, for their text
        self._labels = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.lang = values.get("lang")
        if "id" in values:
            self.ids.append(values["id"])
        if tag == "h1":
            self.h1 += 1
        if tag == "label":
            self._labels += 1
            if "for" in values:
                self.label_for.add(values["for"])
        if tag == "a" and values.get("href", "").endswith("#main"):
            self.skip_link = True
        element = _Element(tag, values, in_label=self._labels > 0)
        if tag in _FILLED and values.get("type", "text") not in _UNLABELLED_TYPES:
            self.controls.append(element)
        if tag in ("a", "button"):
            self.named.append(element)
            self._open.append(element)
        if tag == "svg" and values.get("role") == "img":
            self.charts.append(element)

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self._labels -= 1
        if tag in ("a", "button") and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text.append(data)


def _problems(path: str, body: str) -> list[str]:
    page = _Page()
    page.feed(body)
    found: list[str] = []
    ids = set(page.ids)
    if not page.lang:
        found.append("no lang on <html>")
    if page.h1 != 1:
        found.append(f"{page.h1} <h1> headings")
    if not page.skip_link:
        found.append("no link to skip to the content")
    twice = sorted({i for i in page.ids if page.ids.count(i) > 1})
    if twice:
        found.append(f"ids used twice: {twice}")
    for control in page.controls:
        a = control.attrs
        by = a.get("aria-labelledby", "").split()
        labelled = (
            a.get("id") in page.label_for
            or a.get("aria-label", "").strip()
            or (by and all(i in ids for i in by))
            or control.in_label
        )
        if not labelled:
            found.append(f"<{control.tag} name={a.get('name')!r}> has no label")
        described = a.get("aria-describedby", "").split()
        if any(i not in ids for i in described):
            found.append(f"<{control.tag} name={a.get('name')!r}> describedby a missing id")
    for element in page.named:
        name = "".join(element.text).strip() or element.attrs.get("aria-label", "").strip()
        if not name:
            found.append(f"<{element.tag} {element.attrs}> has no name")
    for chart in page.charts:
        parts = chart.attrs.get("aria-labelledby", "").split()
        if not parts or any(i not in ids for i in parts):
            found.append(f"chart {chart.attrs} has no title and description")
    return [f"{path}: {problem}" for problem in found]


@pytest.fixture
async def console(settings: Settings) -> AsyncIterator[Console]:
    async with open_console(settings) as found:
        yield found


async def test_every_page_labels_its_controls_and_names_its_links(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERALD_TOKEN_KEYS", TokenCipher.generate_key())
    admin = await console.key("admin", ["admin"])
    run_id = await ingestion_scene(console)
    account, post, _ = await social_scene(console)
    dataset = {
        "id": "air",
        "title": "Air quality",
        "description": "Hourly measures.",
        "publisher": {"name": "Office", "uri": "https://example.org/office"},
        "source": {"type": "generated", "count": 10},
    }
    async with console.browser(Authorization=f"Bearer {admin}") as api:
        assert (await api.post("/v1/datasets", json=dataset)).status_code == 201
    async with console.client.pool.connection() as conn:
        schedule = await create_schedule(
            conn, ScheduleSpec("noop", "nightly", "daily", "UTC", at=dt.time(3))
        )
    done = await console.client.enqueue("echo", {"n": 1}, key="ok")
    dead = await console.client.enqueue("permanent", {}, key="broken")
    async with running_worker(console.settings, concurrency=2):
        for job in (done, dead):
            await wait_for_job(console.client, job.id)
    waiting = await console.client.enqueue("echo", {"n": 2}, key="later")
    dead_id = (await console.rows("SELECT id FROM dead_letters"))[0]["id"]
    await console.rows(
        "INSERT INTO dataset_versions (dataset_id, version, state, job_id, error) "
        "VALUES ('air', 1, 'failed', NULL, 'source unreachable') RETURNING 1"
    )

    pages = [
        "/ui/", "/ui/?window=24h", "/ui/jobs", "/ui/jobs?state=dead", f"/ui/jobs/{done.id}",
        f"/ui/jobs/{dead.id}", f"/ui/jobs/{waiting.id}", "/ui/dead-letters",
        f"/ui/dead-letters/{dead_id}", "/ui/schedules", f"/ui/schedules/{schedule.id}",
        f"/ui/schedules/{schedule.id}/edit", "/ui/audit", "/ui/datasets", "/ui/datasets/air",
        "/ui/datasets/air/versions/1",
        f"/ui/actions/dead_letter.replay?target={dead_id}",
        f"/ui/actions/dead_letter.discard?target={dead_id}",
        f"/ui/actions/job.cancel?target={waiting.id}",
        f"/ui/actions/job.retry_now?target={waiting.id}",
        f"/ui/actions/schedule.pause?target={schedule.id}",
        "/ui/actions/dataset.publish?target=air",
        "/ui/actions/dataset_version.delete?target=air/1",
        "/ui/ingestion", f"/ui/ingestion/runs/{run_id}", "/ui/ingestion/quarantine",
        "/ui/ingestion/providers/city-events",
        "/ui/actions/ingest_provider.fetch?target=city-events",
        "/ui/social", f"/ui/social/accounts/{account}", f"/ui/social/posts/{post}",
        f"/ui/actions/social_account.disconnect?target={account}",
        "/ui/jobs/999999",  # an error page
    ]  # fmt: skip
    problems: list[str] = []
    async with console.browser() as http:
        signin = await http.get("/ui/signin")
        problems += _problems("/ui/signin", signin.text)
        csrf = await sign_in(http, admin)
        for path in pages:
            answer = await http.get(path)
            assert answer.status_code in (200, 404), (path, answer.status_code)
            problems += _problems(path, answer.text)
        # A review asking again for the missing reason marks the field invalid, described.
        again = await http.post(
            "/ui/actions/schedule.pause/run",
            data={"csrf": csrf, "target": str(schedule.id), "reason": ""},
        )
        assert again.status_code == 422 and 'aria-invalid="true"' in again.text
        problems += _problems("a review asking for its reason", again.text)
    assert problems == []


def test_the_checker_finds_what_it_looks_for() -> None:
    """The checks above fail on a page that breaks them (they are not vacuous)."""
    broken = (
        '<html><body><h1>A</h1><h1>B</h1><input name="q"><select id="s" name="s"></select>'
        '<input id="d" name="d" aria-describedby="gone"><label for="d">D</label>'
        '<a href="/x"></a><button></button><svg role="img"></svg><p id="s"></p></body></html>'
    )
    found = _problems("/broken", broken)
    for expected in (
        "no lang", "2 <h1>", "no link to skip", "ids used twice: ['s']",
        "<input name='q'> has no label", "<select name='s'> has no label",
        "<input name='d'> describedby a missing id", "<a {'href': '/x'}> has no name",
        "<button {}> has no name", "chart {'role': 'img'} has no title",
    ):  # fmt: skip
        assert any(expected in problem for problem in found), (expected, found)
    fine = (
        '<html lang="en"><body><a href="#main">Skip</a><h1>A</h1>'
        '<label>Q <input name="q"></label><input name="r" aria-label="R">'
        '<input type="hidden" name="csrf"><button aria-label="Go"></button></body></html>'
    )
    assert _problems("/fine", fine) == []
