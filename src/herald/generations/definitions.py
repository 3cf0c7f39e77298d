"""Definitions: the versioned transforms that turn a partition's input into its output.

A run names a definition version; a worker builds with exactly that version or fails the
task permanently (a run never silently uses another transform).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Record = dict[str, Any]


@dataclass(frozen=True)
class Attempt:
    """What a hook learns about the attempt that just wrote its output."""

    run_id: int
    partition: str
    job_id: int
    attempt: int
    fence: int
    location: str


@dataclass(frozen=True)
class Definition:
    """``transform(partition, records) -> rows`` for one dataset at one version.

    ``required`` are the fields every input record must carry (a record without one is a
    deterministic failure: its file is quarantined, not retried). ``after_write`` is
    called (on a worker thread) once the attempt's output is durable and before it is
    registered; it may block, e.g. to hand the output to another system.
    """

    dataset: str
    version: str
    transform: Callable[[str, list[Record]], list[Record]]
    required: tuple[str, ...] = ()
    after_write: Callable[[Attempt], None] | None = None


@dataclass
class Definitions:
    """The definitions an application can build, by (dataset, version)."""

    known: dict[tuple[str, str], Definition] = field(default_factory=dict)

    def add(self, definition: Definition) -> Definition:
        key = (definition.dataset, definition.version)
        if key in self.known:
            raise ValueError(f"definition {key} is registered twice")
        self.known[key] = definition
        return definition

    def extend(self, other: Definitions) -> None:
        """Add every definition of ``other`` (none may be registered already)."""
        if other is not self:
            for definition in other.known.values():
                self.add(definition)

    def get(self, dataset: str, version: str) -> Definition | None:
        return self.known.get((dataset, version))
