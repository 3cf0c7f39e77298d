"""SHACL validation of catalog metadata, with a report people can read.

Herald ships its own shapes (``shapes/basic.ttl`` and ``shapes/high.ttl``), written
from the DCAT-AP 3.0 specification. The ``basic`` tier checks the mandatory
properties; the ``high`` tier adds the recommended properties and the classes of
property values. Any other shapes graph (e.g. the official DCAT-AP shapes) can be
passed instead. Metadata conforms when the report holds no violation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

import pyshacl
from rdflib import Graph, Node, URIRef
from rdflib.namespace import RDF, SH
from rdflib.term import BNode

from herald.catalog.metadata import PREFIXES

Tier = Literal["basic", "high"]
TIERS: tuple[Tier, ...] = ("basic", "high")
_TIER_FILES: dict[Tier, tuple[str, ...]] = {
    "basic": ("basic.ttl",),
    "high": ("basic.ttl", "high.ttl"),
}


@dataclass(frozen=True)
class Finding:
    """One SHACL result: which rule, on which resource and property, and why."""

    severity: str  # Violation, Warning or Info
    focus_node: str
    path: str | None
    message: str
    shape: str
    value: str | None

    def line(self) -> str:
        where = self.focus_node + (f" {self.path}" if self.path else "")
        value = f" (value: {self.value})" if self.value else ""
        return f"{self.severity}: {where}: {self.message}{value} [shape {self.shape}]"


@dataclass(frozen=True)
class ValidationReport:
    tier: str
    findings: tuple[Finding, ...]

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "Violation"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "Warning"]

    @property
    def conforms(self) -> bool:
        return not self.violations

    def text(self) -> str:
        if not self.findings:
            return f"conforms to the {self.tier} tier"
        verdict = "conforms" if self.conforms else "does not conform"
        head = (
            f"{verdict} to the {self.tier} tier: {len(self.violations)} violation(s), "
            f"{len(self.warnings)} warning(s)"
        )
        return "\n".join([head, *(f"- {f.line()}" for f in self.findings)])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly form, for a job result or a status endpoint."""
        return {
            "tier": self.tier,
            "conforms": self.conforms,
            "findings": [asdict(f) for f in self.findings],
        }


@cache
def _shapes_text(name: str) -> str:
    return resources.files("herald.catalog").joinpath("shapes", name).read_text("utf-8")


def tier_shapes(tier: Tier) -> Graph:
    """Herald's own shapes graph for ``tier``."""
    if tier not in _TIER_FILES:
        raise ValueError(f"unknown quality tier {tier!r} (known: {', '.join(TIERS)})")
    graph = Graph()
    for name in _TIER_FILES[tier]:
        graph.parse(data=_shapes_text(name), format="turtle")
    return graph


def validate(data: Graph, tier: Tier = "basic", shapes: Graph | None = None) -> ValidationReport:
    """Validate ``data`` against Herald's ``tier`` shapes, or against ``shapes``."""
    shapes_graph = shapes if shapes is not None else tier_shapes(tier)
    _conforms, results, _text = pyshacl.validate(
        data,
        shacl_graph=shapes_graph,
        inference="none",
        allow_warnings=True,
    )
    assert isinstance(results, Graph)
    findings = _findings(results, data, shapes_graph)
    return ValidationReport(tier=tier if shapes is None else "custom", findings=findings)


def merged(graphs: Iterable[Graph]) -> Graph:
    """One graph holding every triple of ``graphs`` (e.g. catalog plus an entry)."""
    union = Graph()
    for prefix, namespace in PREFIXES.items():
        union.bind(prefix, namespace)
    for graph in graphs:
        for triple in graph:
            union.add(triple)
    return union


_ORDER = {"Violation": 0, "Warning": 1, "Info": 2}


def _findings(results: Graph, data: Graph, shapes: Graph) -> tuple[Finding, ...]:
    names = merged([])  # only its namespace bindings are used, for short names
    names.bind("herald", "urn:herald:shapes:")
    found: list[Finding] = []
    for result in results.subjects(RDF.type, SH.ValidationResult):
        severity = results.value(result, SH.resultSeverity)
        shape = results.value(result, SH.sourceShape)
        message = results.value(result, SH.resultMessage)
        found.append(
            Finding(
                severity=_local(severity) if severity is not None else "Violation",
                focus_node=_show(results.value(result, SH.focusNode), names),
                path=_path(results.value(result, SH.resultPath), results, names),
                message=str(message) if message is not None else "constraint not met",
                shape=_shape_name(shape, shapes, names),
                value=_optional(results.value(result, SH.value), names),
            )
        )
    found.sort(key=lambda f: (_ORDER.get(f.severity, 3), f.focus_node, f.path or ""))
    return tuple(found)


def _local(node: Node) -> str:
    text = str(node)
    return text.rsplit("#", 1)[-1].rsplit("/", 1)[-1]


def _show(node: Node | None, names: Graph) -> str:
    if node is None:
        return "(none)"
    if isinstance(node, URIRef):
        try:
            return names.namespace_manager.normalizeUri(node)
        except ValueError:
            return f"<{node}>"
    return str(node)


def _optional(node: Node | None, names: Graph) -> str | None:
    return None if node is None else _show(node, names)


def _path(node: Node | None, results: Graph, names: Graph) -> str | None:
    if node is None:
        return None
    if isinstance(node, BNode):
        inverse = results.value(node, SH.inversePath)
        if inverse is not None:
            return f"^{_show(inverse, names)}"
        return "(complex path)"
    return _show(node, names)


def _shape_name(shape: Node | None, shapes: Graph, names: Graph) -> str:
    """A property shape is usually a blank node: name it by its parent and path."""
    if shape is None:
        return "(unknown)"
    if not isinstance(shape, BNode):
        return _show(shape, names)
    parent = shapes.value(predicate=SH.property, object=shape)
    path = shapes.value(shape, SH.path)
    parent_name = _show(parent, names) if parent is not None else "(anonymous shape)"
    return f"{parent_name} / {_show(path, names)}" if path is not None else parent_name
