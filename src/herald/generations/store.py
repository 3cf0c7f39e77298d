"""Where raw input and attempt output live: a directory of write-once files.

Every attempt writes to a location of its own (dataset / partition / run / job / fence),
created exclusively: an attempt can never overwrite another's bytes, and a location once
written is never rewritten. Writing bytes publishes nothing; only the coordinator's pointer
swap does.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from herald.config import Settings

ROOT_VARIABLE = "HERALD_GENERATIONS_ROOT"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


class AlreadyWritten(FileExistsError):
    """The location holds bytes already; write-once locations are never rewritten."""


def root(settings: Settings | None = None) -> Path:
    """The store's directory: $HERALD_GENERATIONS_ROOT, else <data dir>/generations."""
    configured = os.environ.get(ROOT_VARIABLE)
    if configured:
        return Path(configured)
    data_dir = settings.data_dir if settings is not None else Path(".herald")
    return data_dir / "generations"


def checksum(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _part(name: str) -> str:
    if not _SAFE.match(name):
        raise ValueError(f"{name!r} cannot be part of a storage location")
    return name


def attempt_location(dataset: str, partition: str, run_id: int, job_id: int, fence: int) -> str:
    """The relative location reserved for one attempt's output."""
    return f"out/{_part(dataset)}/{_part(partition)}/run-{run_id}/job-{job_id}-fence-{fence}.jsonl"


def raw_location(dataset: str, name: str) -> str:
    return f"raw/{_part(dataset)}/{_part(name)}"


class Store:
    """Write-once files under one root directory, addressed by relative locations."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def path(self, location: str) -> Path:
        path = (self.base / location).resolve()
        if self.base.resolve() not in path.parents:
            raise ValueError(f"location {location!r} leaves the store")
        return path

    def write_once(self, location: str, data: bytes) -> str:
        """Write ``data`` to a new location (durably); returns its checksum."""
        path = self.path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        except FileExistsError:
            raise AlreadyWritten(location) from None
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return checksum(data)

    def read(self, location: str) -> bytes:
        return self.path(location).read_bytes()

    def exists(self, location: str) -> bool:
        return self.path(location).exists()

    def attempt_outputs(self, dataset: str, partition: str) -> list[str]:
        """Every attempt location written for a partition (registered or orphaned)."""
        folder = self.path(f"out/{_part(dataset)}/{_part(partition)}")
        if not folder.is_dir():
            return []
        return sorted(
            str(p.relative_to(self.base.resolve())) for p in folder.glob("run-*/job-*.jsonl")
        )

    def all_attempt_outputs(self) -> list[str]:
        """Every attempt location in the store."""
        folder = self.base / "out"
        if not folder.is_dir():
            return []
        base = self.base.resolve()
        return sorted(
            str(p.resolve().relative_to(base)) for p in folder.glob("*/*/run-*/job-*.jsonl")
        )
