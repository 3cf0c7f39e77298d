"""The official DCAT-AP 3.0.1 SHACL shapes published by SEMIC, read at test time from
the shared reference folder (never copied into the project). Licence: CC-BY 4.0,
(c) European Union.

Two sets: the shapes of the HTML specification (mandatory, recommended, ranges) and
the release's single shapes file, which also checks the classes of values.
"""

from __future__ import annotations

from functools import cache

from rdflib import Graph

from herald.catalog.validation import ValidationReport, validate
from tests.shared import shared_path

HTML_SHAPES = ("html/shacl/shapes.ttl", "html/shacl/shapes_recommended.ttl", "html/shacl/range.ttl")
RELEASE_SHAPES = "shacl/dcat-ap-SHACL.ttl"


@cache
def _parsed(name: str) -> Graph:
    return Graph().parse(shared_path("reference", "dcat-ap", "3.0.1", name), format="turtle")


def official_shapes(*names: str) -> Graph:
    shapes = Graph()
    for name in names:
        for triple in _parsed(name):
            shapes.add(triple)
    return shapes


def official_reports(data: Graph) -> dict[str, ValidationReport]:
    """``data`` validated against both official sets, by set."""
    return {
        "html": validate(data, shapes=official_shapes(*HTML_SHAPES)),
        "release": validate(data, shapes=official_shapes(RELEASE_SHAPES)),
    }
