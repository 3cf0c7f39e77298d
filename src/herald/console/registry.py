"""What the console is made of, and how an application adds its pages to it.

The console owns a small registry of *extensions*. Each brings:

* a FastAPI router whose routes are served under ``/ui`` (paths must not collide);
* a folder of Jinja templates, reachable as ``"<extension name>/<file>"``;
* navigation entries, each shown to callers holding its scope;
* actions, which the console reviews (what will happen), confirms, scope-checks and
  hands a reason to (the action writes its audit record like every manual action).

An application package contributes an extension without the console importing it: it
names one in the ``herald.console`` entry-point group of its distribution::

    [project.entry-points."herald.console"]
    catalog = "herald.catalog.console:extension"

The value is a :class:`ConsoleExtension` or a function returning one. ``install`` also
takes extensions explicitly (tests, embedding applications).
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fastapi import APIRouter

from herald.api.auth import SCOPES
from herald.errors import HeraldError
from herald.registry import Herald

if TYPE_CHECKING:
    from herald.console.sessions import Caller

T = TypeVar("T")  # the row a per-target review loads

ENTRY_POINT_GROUP = "herald.console"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_ACTION = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


class ConsoleError(HeraldError):
    """An extension that cannot be installed (bad name, path or action; a clash)."""


@dataclass(frozen=True)
class NavEntry:
    """A link in the console's navigation, shown to callers holding ``scope``."""

    label: str
    path: str  # under /ui, e.g. "/datasets"
    scope: str = "read"
    order: int = 100  # the engine's own pages use 10-60


@dataclass(frozen=True)
class Option:
    """An extra choice offered on an action's review page (a checkbox)."""

    name: str
    label: str
    help: str = ""


@dataclass(frozen=True)
class Review:
    """What an action will do to its targets, shown before the operator confirms.

    ``effects`` has one line per target it will act on; ``refusals`` names targets it
    will leave alone and why; ``params`` are carried to the confirmed run as they are.
    """

    title: str
    effects: Sequence[str]
    refusals: Sequence[str] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    options: Sequence[Option] = ()
    details: Sequence[tuple[str, str, str]] = ()  # (field, before, after) of an edit


@dataclass(frozen=True)
class Done:
    """What an action did to one target, and optionally a page (under /ui) to see it."""

    message: str
    link: str | None = None


# review(caller, targets, params); perform(caller, target, reason, params) -> what it did.
ReviewFn = Callable[["Caller", Sequence[str], Mapping[str, str]], Awaitable[Review]]
PerformFn = Callable[["Caller", str, str, Mapping[str, str]], Awaitable[str | Done]]


@dataclass(frozen=True)
class Skip:
    """A review's verdict on one target: the action will leave it alone, and why."""

    why: str


def per_target(
    title: str,
    what: str,
    load: Callable[[Caller, str], Awaitable[T | None]],
    verdict: Callable[[Caller, T], str | Skip],
    options: Sequence[Option] = (),
) -> ReviewFn:
    """A review that loads each target and asks ``verdict`` what the action does to it.

    ``title`` has a ``{}`` for the targets ("Pause {}" -> "Pause schedule 4", "Pause 3
    schedules"); a target ``load`` does not find is refused as absent.
    """

    async def review(caller: Caller, targets: Sequence[str], params: Mapping[str, str]) -> Review:
        effects: list[str] = []
        refusals: list[str] = []
        for target in targets:
            row = await load(caller, target)
            found = Skip(f"{what} {target} does not exist") if row is None else verdict(caller, row)
            if isinstance(found, Skip):
                refusals.append(found.why)
            else:
                effects.append(found)
        noun = f"{what} {targets[0]}" if len(targets) == 1 else f"{len(targets)} {what}s"
        return Review(title.format(noun), effects, refusals, options=options)

    return review


@dataclass(frozen=True)
class Action:
    """A manual action: needs ``scope``, a reason, a review step, and lands in the audit log.

    ``perform`` acts on one target and returns what it did; to refuse, it raises a
    :class:`~herald.errors.HeraldError`, a ``ValueError`` or a
    :class:`~herald.console.web.Missing` (the message is shown, the other targets go
    on). ``back`` names the page (under ``/ui``) to return to after a run.
    """

    name: str  # "<target type>.<verb>", e.g. "dead_letter.replay"
    label: str
    scope: str
    review: ReviewFn
    perform: PerformFn
    back: Callable[[Sequence[str]], str]
    max_targets: int = 200


@dataclass(frozen=True)
class ConsoleExtension:
    """Pages, templates, navigation and actions an application adds to the console."""

    name: str
    router: APIRouter | None = None
    templates: Traversable | Path | None = None
    nav: Sequence[NavEntry] = ()
    actions: Sequence[Action] = ()
    # Shown only for applications this returns True for (default: always).
    enabled: Callable[[Herald], bool] | None = None


def application_extension(
    package: str,
    router: APIRouter,
    nav: NavEntry,
    actions: Sequence[Action] = (),
    enabled: Callable[[Herald], bool] | None = None,
) -> ConsoleExtension:
    """An application package's extension, laid out as every application lays it out:
    named after the package, its templates in the package's ``console_templates``
    folder, one navigation entry."""
    return ConsoleExtension(
        name=package.rsplit(".", 1)[-1],
        router=router,
        templates=resources.files(package) / "console_templates",
        nav=(nav,),
        actions=actions,
        enabled=enabled,
    )


def _routes(routes: Iterable[object], prefix: str = "") -> Iterable[tuple[str, str]]:
    """(method, path) of every route, through routers included in routers."""
    for route in routes:
        inner = getattr(route, "original_router", None)  # a router included in this one
        if inner is not None:
            context = getattr(route, "include_context", None)
            yield from _routes(inner.routes, prefix + str(getattr(context, "prefix", "")))
            continue
        path = getattr(route, "path", None)
        if path is not None:
            for method in sorted(getattr(route, "methods", None) or {"*"}):
                yield method, prefix + path


def discover() -> list[ConsoleExtension]:
    """Every extension named in the ``herald.console`` entry-point group, by name."""
    found = []
    for point in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)):
        try:
            value = point.load()
        except Exception as exc:
            raise ConsoleError(
                f"console extension {point.value!r} cannot be loaded: {exc}"
            ) from exc
        extension = value if isinstance(value, ConsoleExtension) else value()
        if not isinstance(extension, ConsoleExtension):
            raise ConsoleError(f"{point.value!r} is not a herald.console.ConsoleExtension")
        found.append(extension)
    return found


class Registry:
    """The console's own pages and actions plus every enabled extension's, checked."""

    def __init__(self, core: ConsoleExtension, extensions: Iterable[ConsoleExtension]) -> None:
        self.extensions: list[ConsoleExtension] = []
        self.actions: dict[str, Action] = {}
        self._paths: dict[str, str] = {}
        for extension in (core, *extensions):
            self._add(extension)
        self.nav = sorted(
            (entry for ext in self.extensions for entry in ext.nav), key=lambda e: e.order
        )

    def _add(self, extension: ConsoleExtension) -> None:
        name = extension.name
        if not _NAME.match(name):
            raise ConsoleError(f"console extension name {name!r} must match {_NAME.pattern}")
        if any(e.name == name for e in self.extensions):
            raise ConsoleError(f"two console extensions are named {name!r}")
        for entry in extension.nav:
            if entry.scope not in SCOPES or not entry.path.startswith("/"):
                raise ConsoleError(f"{name}: navigation entry {entry!r} is not valid")
        for action in extension.actions:
            if not _ACTION.match(action.name) or action.scope not in SCOPES:
                raise ConsoleError(f"{name}: action {action.name!r} needs a valid name and scope")
            if action.name in self.actions:
                raise ConsoleError(f"{name}: action {action.name!r} is registered twice")
            self.actions[action.name] = action
        if extension.router is not None:
            for method, path in _routes(extension.router.routes):
                owner = self._paths.setdefault(f"{method} {path}", name)
                if owner != name:
                    raise ConsoleError(f"{name}: {method} {path} is already {owner}'s page")
        self.extensions.append(extension)

    def routes(self) -> list[tuple[str, str, str]]:
        """Every (method, path, extension) the console serves, paths under /ui."""
        found = []
        for key, owner in self._paths.items():
            method, path = key.split(" ", 1)
            found.append((method, path, owner))
        return sorted(found)

    def action(self, name: str) -> Action | None:
        return self.actions.get(name)
