"""Reading a partition: exactly one whole generation, never a mix.

The pointer and the publication it names are read in one statement; the bytes are at
the chosen candidate's write-once location, so whatever the pointer said when it was
read stays readable and unchanged however many generations are published meanwhile.
The checksum is verified on read: a reader never trusts bytes the pointer does not vouch
for.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herald.db import AsyncConn
from herald.generations import records
from herald.generations.errors import NotFound
from herald.generations.store import checksum

if TYPE_CHECKING:
    from herald.generations.shared import Generations


class CorruptGeneration(RuntimeError):
    """The bytes at a published location do not match the publication's checksum."""


@dataclass(frozen=True)
class Generation:
    dataset: str
    partition: str
    generation: int
    publication_id: str
    inputs: list[int]
    definition_version: str
    rows: list[dict[str, Any]]


async def read_current(
    gen: Generations, conn: AsyncConn, dataset: str, partition: str
) -> Generation:
    pointer = await records.current(conn, dataset, partition)
    if pointer is None or pointer.generation == 0 or pointer.location is None:
        raise NotFound(f"{dataset}/{partition} has no published generation")
    data = await asyncio.to_thread(gen.store.read, pointer.location)
    if checksum(data) != pointer.checksum:
        raise CorruptGeneration(f"{pointer.location} does not match its publication")
    return Generation(
        dataset=dataset,
        partition=partition,
        generation=pointer.generation,
        publication_id=str(pointer.publication_id),
        inputs=list(pointer.manifest_ids or []),
        definition_version=str(pointer.definition_version),
        rows=[json.loads(line) for line in data.decode().splitlines() if line],
    )
