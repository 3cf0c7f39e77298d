"""A dataset's description as a JSON document, read and written the same way by the CLI
(``herald dataset register --file``) and the HTTP API (``POST /v1/datasets``)::

    {"id": "air-quality", "title": "Air quality", "description": "...",
     "publisher": {"name": "Environment Agency", "uri": "https://example.org/agency",
                   "type": {"uri": "http://purl.org/adms/publishertype/NationalAuthority",
                            "label": "National authority"}},
     "license": "https://creativecommons.org/licenses/by/4.0/",
     "keywords": ["air"], "themes": [{"uri": "http://...data-theme/ENVI", "label": "Environment"}],
     "contact_point": {"name": "Open data team", "email": "opendata@example.org"},
     "languages": ["ENG"], "landing_page": "https://example.org/air",
     "spatial": {"uri": "http://publications.europa.eu/resource/authority/country/BEL",
                 "bbox": "POLYGON((...))", "centroid": "POINT(4.5 50.5)"},
     "temporal": {"start": "2024-01-01", "end": "2024-12-31"},
     "source": {"type": "csv", "path": "air.csv"}, "tier": "basic",
     "recurrence": {"frequency": "daily", "timezone": "Europe/Brussels", "at": "02:00"}}

``license`` is a URI or ``{"uri": ..., "type": {"uri": ..., "label": ...}}`` (an ADMS
licence type); languages are three-letter codes or authority URIs. :func:`dataset_spec`
writes a registered dataset back in this form, so what one reads can be registered again
unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from herald.catalog.datasets import Dataset
from herald.catalog.errors import MetadataError
from herald.catalog.metadata import (
    Agent,
    Concept,
    ContactPoint,
    DatasetInfo,
    License,
    Location,
    Period,
    language,
)

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
    """A dataset and its optional recurrence from its JSON description (see module doc);
    a relative file source path is read relative to ``base_dir`` when given."""
    if not isinstance(data, dict):
        raise MetadataError("a dataset description is a JSON object")
    unknown = set(data) - _FIELDS
    if unknown:
        raise MetadataError(f"unknown dataset field(s): {', '.join(sorted(unknown))}")
    info = _info(data)
    source = _source(data, base_dir)
    tier = _text(data, "tier", "basic")
    if tier not in ("basic", "high"):
        raise MetadataError(f"'tier' must be basic or high, got {tier!r}")
    recurrence = data.get("recurrence")
    if recurrence is not None and not isinstance(recurrence, dict):
        raise MetadataError("'recurrence' must be an object")
    return Dataset(info, source, tier="high" if tier == "high" else "basic"), recurrence


def _info(data: dict[str, Any]) -> DatasetInfo:
    """The DCAT-AP description, checked field by field in the order they are listed."""
    publisher = _object(data, "publisher", ("name", "uri"))
    licence = data.get("license")
    if isinstance(licence, str):
        licence = {"uri": licence}
    info = DatasetInfo(
        id=_text(data, "id"),
        title=_text(data, "title"),
        description=_text(data, "description", ""),
        publisher=_agent(publisher),
        license=_licence(licence) if isinstance(licence, dict) else None,
        keywords=_texts(data, "keywords"),
        themes=tuple(_concept(t, "a theme") for t in data.get("themes", [])),
        contact_point=_contact(data.get("contact_point")),
        languages=tuple(
            code if ":" in code else language(code) for code in _texts(data, "languages")
        ),
        spatial=_location(data.get("spatial")),
        temporal=_period(data.get("temporal")),
        landing_page=data.get("landing_page"),
    )
    if licence is not None and not isinstance(licence, dict):
        raise MetadataError("'license' must be a URI or an object with 'uri'")
    return info


def _agent(publisher: dict[str, Any]) -> Agent:
    kind = _concept(publisher["type"], "publisher type") if "type" in publisher else None
    return Agent(publisher["name"], publisher["uri"], kind)


def _licence(licence: dict[str, Any]) -> License:
    kind = _concept(licence["type"], "licence type") if "type" in licence else None
    return License(_text(licence, "uri"), kind)


def _contact(contact: Any) -> ContactPoint | None:
    if not isinstance(contact, dict):
        return None
    return ContactPoint(_text(contact, "name"), contact.get("email"), contact.get("url"))


def _location(spatial: Any) -> Location | None:
    if not isinstance(spatial, dict):
        return None
    return Location(_text(spatial, "uri"), spatial.get("bbox"), spatial.get("centroid"))


def _period(temporal: Any) -> Period | None:
    if not isinstance(temporal, dict):
        return None
    return Period(
        _date(temporal.get("start"), "temporal start"),
        _date(temporal["end"], "temporal end") if temporal.get("end") else None,
    )


def _source(data: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
    """The source spec; a relative file path is taken relative to ``base_dir``."""
    source = dict(_object(data, "source", ("type",)))
    path = source.get("path")
    if base_dir is not None and isinstance(path, str) and not Path(path).is_absolute():
        source["path"] = str((base_dir / path).resolve())
    return source


def _concept_out(concept: Concept | None) -> dict[str, str] | None:
    return None if concept is None else {"uri": concept.uri, "label": concept.label}


def dataset_spec(dataset: Dataset) -> dict[str, Any]:
    """The description of a registered dataset, in the form :func:`parse_dataset` reads
    (without its recurrence, which is a schedule of its own)."""
    info = dataset.info
    publisher = info.publisher
    contact = info.contact_point
    spatial = info.spatial
    temporal = info.temporal
    return {
        "id": info.id,
        "title": info.title,
        "description": info.description,
        "publisher": (
            {"name": publisher.name, "uri": publisher.uri, "type": _concept_out(publisher.type)}
            if publisher
            else None
        ),
        "license": (
            {"uri": info.license.uri, "type": _concept_out(info.license.type)}
            if info.license
            else None
        ),
        "keywords": list(info.keywords),
        "themes": [_concept_out(t) for t in info.themes],
        "contact_point": (
            {"name": contact.name, "email": contact.email, "url": contact.url} if contact else None
        ),
        "languages": list(info.languages),
        "spatial": (
            {"uri": spatial.uri, "bbox": spatial.bbox, "centroid": spatial.centroid}
            if spatial
            else None
        ),
        "temporal": (
            {
                "start": temporal.start.isoformat(),
                "end": temporal.end.isoformat() if temporal.end else None,
            }
            if temporal
            else None
        ),
        "landing_page": info.landing_page,
        "source": dict(dataset.source),
        "tier": dataset.tier,
    }
