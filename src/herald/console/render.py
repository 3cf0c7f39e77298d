"""Server-rendered HTML: the Jinja environment, its filters, whole pages and fragments.

A page marks the parts that change on their own as ``{% block live_<name> %}`` inside an
element with ``data-live="<name>"``; the console's script asks for that block again
(header ``X-Herald-Fragment: <name>``) and swaps it in, so pages update without a reload.
Templates of an extension are reached as ``"<extension name>/<file>"``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jinja2
from jinja2.loaders import split_template_path
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from herald.console.registry import NavEntry, Registry
from herald.console.sessions import Caller, console_settings, take_flash

FRAGMENT_HEADER = "x-herald-fragment"
NO_STORE = {"Cache-Control": "no-store", "Vary": "X-Herald-Fragment, Cookie"}


class _FolderLoader(jinja2.BaseLoader):
    """Templates from a folder of a package (or any directory)."""

    def __init__(self, folder: Traversable | Path) -> None:
        self.folder = folder

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        node: Traversable | Path = self.folder
        for part in split_template_path(template):  # refuses ".." and the like
            node = node / part
        if not node.is_file():
            raise jinja2.TemplateNotFound(template)
        return node.read_text(encoding="utf-8"), None, lambda: True


def static_folder() -> Traversable:
    return resources.files("herald.console") / "static"


def _asset_versions() -> dict[str, str]:
    """A content hash per asset: its URL changes whenever the file does."""
    versions = {}
    for entry in static_folder().iterdir():
        if entry.is_file():
            versions[entry.name] = hashlib.sha256(entry.read_bytes()).hexdigest()[:12]
    return versions


# --- filters ------------------------------------------------------------------------------


def when(value: datetime | str | None) -> str:
    """A moment in UTC, to the second."""
    if value is None:
        return "-"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float | timedelta | None) -> str:
    """A span as its two largest units: ``3 h 20 min``, ``45 s``."""
    if seconds is None:
        return "-"
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    if not math.isfinite(seconds):
        return "-"
    whole = int(abs(seconds))
    if whole < 60:
        return f"{abs(seconds):.0f} s" if whole >= 1 or seconds == 0 else f"{abs(seconds):.1f} s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if whole >= size:
            parts.append(f"{whole // size} {unit}")
            whole %= size
    return " ".join(parts[:2])


def relative(value: datetime | str | None, now: datetime) -> Markup:
    """``<time>`` saying how long ago (or how soon) a moment is, with the moment itself."""
    if value is None:
        return Markup("-")
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    delta = (now - value).total_seconds()
    text = f"{duration(delta)} ago" if delta >= 0 else f"in {duration(-delta)}"
    return Markup('<time datetime="{iso}" title="{full}">{text}</time>').format(
        iso=value.astimezone(UTC).isoformat(), full=when(value), text=text
    )


def pretty(value: Any) -> str:
    """JSON as an operator reads it: indented, keys as stored, text unescaped."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def size(value: int | None) -> str:
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"


# --- the renderer -------------------------------------------------------------------------


class Renderer:
    """One Jinja environment for the console's templates and every extension's."""

    def __init__(self, registry: Registry) -> None:
        prefixes: dict[str, jinja2.BaseLoader] = {
            ext.name: _FolderLoader(ext.templates)
            for ext in registry.extensions
            if ext.templates is not None
        }
        core = _FolderLoader(resources.files("herald.console") / "templates")
        self.env = jinja2.Environment(
            loader=jinja2.ChoiceLoader([jinja2.PrefixLoader(prefixes), core]),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(when=when, duration=duration, pretty=pretty, size=size)
        # The shared macros, as ``m`` in every template and in every live block alone.
        self.env.globals["m"] = self.env.get_template("macros.html").module
        self.registry = registry
        self.assets = _asset_versions()

    def nav(self, caller: Caller | None) -> list[NavEntry]:
        if caller is None:
            return []
        return [entry for entry in self.registry.nav if caller.allows(entry.scope)]

    def context(self, request: Request, caller: Caller | None) -> dict[str, Any]:
        base = str(request.scope.get("root_path") or "")
        now = caller.now if caller is not None else datetime.now(UTC)
        return {
            "request": request,
            "base": base,
            "path": request.url.path,
            "caller": caller,
            "csrf": caller.csrf if caller is not None else "",
            "nav": self.nav(caller),
            "now": now,
            "ago": lambda value: relative(value, now),
            "static": lambda name: f"{base}/static/{name}?v={self.assets.get(name, '0')}",
            "refresh": console_settings(request).refresh,
            "flash": None,
        }

    async def page(
        self,
        request: Request,
        template: str,
        caller: Caller | None,
        values: Mapping[str, Any],
        status: int = 200,
    ) -> HTMLResponse:
        context = {**self.context(request, caller), **values}
        compiled = self.env.get_template(template)
        fragment = request.headers.get(FRAGMENT_HEADER)
        if fragment is not None:
            block = compiled.blocks.get(f"live_{fragment}")
            if block is None:
                return HTMLResponse("no such fragment", status_code=404, headers=NO_STORE)
            html = "".join(block(compiled.new_context(context)))
            return HTMLResponse(html, status_code=status, headers=NO_STORE)
        if caller is not None:
            context["flash"] = await take_flash(caller)
        return HTMLResponse(compiled.render(context), status_code=status, headers=NO_STORE)


async def render(
    request: Request,
    template: str,
    caller: Caller | None,
    status: int = 200,
    **values: Any,
) -> HTMLResponse:
    """Render ``template`` as a whole page, or the live block a fragment request names."""
    renderer = request.app.state.renderer
    assert isinstance(renderer, Renderer)
    return await renderer.page(request, template, caller, values, status)
