"""The strict schema of a dataset's ``source`` over the API: one model per source type,
with the bounds :func:`herald.catalog.sources.check_source_spec` enforces everywhere."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from herald.api.models import Strict
from herald.catalog import sources

NoNul = r"^[^\x00]*$"
ParamName = Annotated[str, Field(pattern=sources.TABLE.pattern)]
ParamValue = (
    Annotated[str, Field(max_length=sources.MAX_PARAM_TEXT, pattern=NoNul)]
    | int
    | float
    | bool
    | None
)
Path = Annotated[str, Field(min_length=1, max_length=sources.MAX_PATH, pattern=NoNul)]


class GeneratedIn(Strict):
    type: Literal["generated"]
    count: Annotated[int, Field(ge=0, le=sources.MAX_GENERATED, strict=True)]


class CsvIn(Strict):
    type: Literal["csv"]
    path: Path = Field(description="relative to the server's source directory")
    delimiter: Annotated[str, Field(min_length=1, max_length=1)] = ","


class JsonLinesIn(Strict):
    type: Literal["jsonl"]
    path: Path = Field(description="relative to the server's source directory")


class PostgresQueryIn(Strict):
    type: Literal["postgres_query"]
    query: Annotated[str, Field(min_length=1, max_length=sources.MAX_QUERY, pattern=NoNul)]
    params: Annotated[dict[ParamName, ParamValue], Field(max_length=sources.MAX_PARAMS)] = {}


class PostgresTableIn(Strict):
    type: Literal["postgres_table"]
    table: Annotated[str, Field(pattern=sources.TABLE.pattern)]


SourceIn = Annotated[
    GeneratedIn | CsvIn | JsonLinesIn | PostgresQueryIn | PostgresTableIn,
    Field(
        discriminator="type",
        description="where the records come from: generated sample records (bounded count), "
        "a csv or jsonl file under the server's source directory, or a query or table read "
        "as the source role (these need an admin key)",
    ),
]


def source_dict(source: Any) -> dict[str, Any]:
    """The stored form of a validated source (defaults left out, as a user wrote it)."""
    spec: dict[str, Any] = source.model_dump(exclude_unset=True)
    spec["type"] = source.type
    return spec
