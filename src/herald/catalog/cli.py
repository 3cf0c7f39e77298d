"""``herald dataset``: register, list, publish and show the versions of datasets.

A dataset is described by a JSON file::

    {"id": "air-quality", "title": "Air quality", "description": "...",
     "publisher": {"name": "Environment Agency", "uri": "https://example.org/agency"},
     "license": "https://creativecommons.org/licenses/by/4.0/",
     "keywords": ["air"], "themes": [{"uri": "http://...data-theme/ENVI", "label": "Environment"}],
     "contact_point": {"name": "Open data team", "email": "opendata@example.org"},
     "languages": ["ENG"], "source": {"type": "csv", "path": "air.csv"}, "tier": "basic",
     "recurrence": {"frequency": "daily", "timezone": "Europe/Brussels", "at": "02:00"}}

File sources given by a relative path are read relative to the spec file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herald import loop
from herald.catalog.errors import MetadataError

if TYPE_CHECKING:
    from herald.catalog.datasets import Dataset
    from herald.catalog.metadata import Concept
    from herald.config import Settings
    from herald.registry import Herald

# The domain modules (rdflib, SHACL) are imported when a dataset command runs, so
# they do not slow down every other ``herald`` command.

COMMAND = "dataset"
_FIELDS = {
    "id",
    "title",
    "description",
    "publisher",
    "license",
    "keywords",
    "themes",
    "contact_point",
    "languages",
    "spatial",
    "temporal",
    "landing_page",
    "source",
    "tier",
    "recurrence",
}


def _object(data: Mapping[str, Any], name: str, required: tuple[str, ...]) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise MetadataError(f"{name!r} must be an object")
    missing = [field for field in required if not isinstance(value.get(field), str)]
    if missing:
        raise MetadataError(f"{name!r} needs {', '.join(repr(m) for m in missing)} (text)")
    return value


def _text(data: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = data.get(name, default)
    if not isinstance(value, str):
        raise MetadataError(f"{name!r} must be text")
    return value


def _texts(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MetadataError(f"{name!r} must be a list of text")
    return tuple(value)


def _concept(value: Any, what: str) -> Concept:
    from herald.catalog.metadata import Concept

    if not isinstance(value, dict) or not all(
        isinstance(value.get(k), str) for k in ("uri", "label")
    ):
        raise MetadataError(f"{what} must be an object with 'uri' and 'label'")
    return Concept(value["uri"], value["label"])


def _date(value: Any, what: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise MetadataError(f"{what} must be a date such as 2024-01-31, got {value!r}") from None


def parse_dataset(data: Any, base_dir: Path | None = None) -> tuple[Dataset, dict[str, Any] | None]:
    """A dataset and its optional recurrence from its JSON description (see module doc)."""
    from herald.catalog.datasets import Dataset
    from herald.catalog.metadata import (
        Agent,
        ContactPoint,
        DatasetInfo,
        License,
        Location,
        Period,
        language,
    )

    if not isinstance(data, dict):
        raise MetadataError("a dataset description is a JSON object")
    unknown = set(data) - _FIELDS
    if unknown:
        raise MetadataError(f"unknown dataset field(s): {', '.join(sorted(unknown))}")
    publisher = _object(data, "publisher", ("name", "uri"))
    licence = data.get("license")
    if isinstance(licence, str):
        licence = {"uri": licence}
    contact = data.get("contact_point")
    spatial = data.get("spatial")
    temporal = data.get("temporal")
    info = DatasetInfo(
        id=_text(data, "id"),
        title=_text(data, "title"),
        description=_text(data, "description", ""),
        publisher=Agent(
            publisher["name"],
            publisher["uri"],
            _concept(publisher["type"], "publisher type") if "type" in publisher else None,
        ),
        license=(
            License(
                _text(licence, "uri"),
                _concept(licence["type"], "licence type") if "type" in licence else None,
            )
            if isinstance(licence, dict)
            else None
        ),
        keywords=_texts(data, "keywords"),
        themes=tuple(_concept(t, "a theme") for t in data.get("themes", [])),
        contact_point=(
            ContactPoint(_text(contact, "name"), contact.get("email"), contact.get("url"))
            if isinstance(contact, dict)
            else None
        ),
        languages=tuple(
            code if ":" in code else language(code) for code in _texts(data, "languages")
        ),
        spatial=(
            Location(_text(spatial, "uri"), spatial.get("bbox"), spatial.get("centroid"))
            if isinstance(spatial, dict)
            else None
        ),
        temporal=(
            Period(
                _date(temporal.get("start"), "temporal start"),
                _date(temporal["end"], "temporal end") if temporal.get("end") else None,
            )
            if isinstance(temporal, dict)
            else None
        ),
        landing_page=data.get("landing_page"),
    )
    if licence is not None and not isinstance(licence, dict):
        raise MetadataError("'license' must be a URI or an object with 'uri'")
    source = dict(_object(data, "source", ("type",)))
    path = source.get("path")
    if base_dir is not None and isinstance(path, str) and not Path(path).is_absolute():
        source["path"] = str((base_dir / path).resolve())
    tier = _text(data, "tier", "basic")
    if tier not in ("basic", "high"):
        raise MetadataError(f"'tier' must be basic or high, got {tier!r}")
    recurrence = data.get("recurrence")
    if recurrence is not None and not isinstance(recurrence, dict):
        raise MetadataError("'recurrence' must be an object")
    return Dataset(info, source, tier="high" if tier == "high" else "basic"), recurrence


def add_commands(sub: Any) -> None:
    """Add ``herald dataset register|list|publish|versions`` to the CLI."""
    dataset = sub.add_parser(COMMAND, help="register, list and publish catalog datasets")
    actions = dataset.add_subparsers(dest="dataset_command", required=True)
    register = actions.add_parser("register", help="register or update a dataset from JSON")
    register.add_argument("--file", required=True, type=Path, help="the dataset's JSON spec")
    actions.add_parser("list", help="list registered datasets")
    publish = actions.add_parser("publish", help="request a new version's publication")
    publish.add_argument("id")
    versions = actions.add_parser("versions", help="a dataset's versions, latest first")
    versions.add_argument("id")


def main(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    """Run one ``herald dataset`` command; the exit status."""
    spec: tuple[Dataset, dict[str, Any] | None] | None = None
    if args.dataset_command == "register":
        path: Path = args.file
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        spec = parse_dataset(data, path.resolve().parent)
    return loop.run(_run(app, settings, args, spec), settings.event_loop)


async def _run(
    app: Herald,
    settings: Settings,
    args: argparse.Namespace,
    spec: tuple[Dataset, dict[str, Any] | None] | None,
) -> int:
    from herald import tables
    from herald.catalog import datasets as registry
    from herald.catalog.pipeline import request_publication, save_dataset
    from herald.client import Client

    async with await Client.open(app, settings) as client:
        command = args.dataset_command
        if spec is not None:
            stored, created = await save_dataset(client, *spec)
            schedule = f", schedule {stored.schedule_id}" if stored.schedule_id is not None else ""
            print(f"{'registered' if created else 'updated'} dataset {stored.id}{schedule}")
            return 0
        if command == "publish":
            admitted = await request_publication(client, args.id)
            state = (
                "already in progress" if admitted.outcome.value == "in_progress" else "requested"
            )
            print(f"{args.id}: version {admitted.version} {state} (job {admitted.id})")
            return 0
        async with client.pool.connection() as conn:
            if command == "list":
                rows = [
                    {
                        "id": d.id,
                        "title": d.info.title,
                        "tier": d.tier,
                        "source": d.source.get("type"),
                        "schedule": d.schedule_id,
                        "next_version": d.next_version,
                    }
                    for d in await registry.list_datasets(conn)
                ]
                print(
                    tables.table(
                        rows, ["id", "title", "tier", "source", "schedule", "next_version"]
                    )
                )
                return 0
            if await registry.get_dataset(conn, args.id) is None:
                raise registry.UnknownDataset(args.id)
            found = await registry.list_versions(conn, args.id)
            rows = [
                {
                    "version": v.version,
                    "state": v.state,
                    "records": v.record_count,
                    "job": v.job_id,
                    "published_at": v.published_at,
                    "error": v.error,
                }
                for v in found
            ]
            print(
                tables.table(rows, ["version", "state", "records", "job", "published_at", "error"])
            )
            return 0
