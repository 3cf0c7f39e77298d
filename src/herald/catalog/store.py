"""Where exported files live: a small interface and its local-filesystem implementation.

A file is written through an :class:`Upload` and becomes visible under its key only on
:meth:`Upload.commit`, all at once; an aborted or killed writer leaves nothing visible.
Keys are immutable: committing over an existing key is refused. Deleting is idempotent,
so a cleanup can be retried until it succeeds. An S3-compatible store implements the
same interface with a multipart upload completed on commit.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from herald.catalog.errors import ExportConflict
from herald.config import Settings

# A key is slash-separated segments of safe characters: no "..", no absolute paths.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_PARTIAL_SUFFIX = ".part"


def check_key(key: str) -> str:
    segments = key.split("/")
    if not key or not all(_SEGMENT.fullmatch(s) and ".." not in s for s in segments):
        raise ValueError(
            f"invalid export key {key!r}: use '/'-separated names of letters, digits, "
            "'.', '_' and '-' (each starting with a letter or digit)"
        )
    return key


def check_segment(name: str, what: str) -> str:
    if not _SEGMENT.fullmatch(name) or ".." in name:
        raise ValueError(
            f"invalid {what} {name!r}: use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, at most 128 characters)"
        )
    return name


class Upload(Protocol):
    """A file being written; invisible until committed."""

    key: str

    def write(self, data: bytes) -> None: ...

    def commit(self) -> None:
        """Make the complete file visible under its key (refused if the key exists)."""
        ...

    def abort(self) -> None:
        """Discard what was written; safe to call after commit (then a no-op) or twice."""
        ...


class ExportStore(Protocol):
    def begin(self, key: str) -> Upload: ...

    def exists(self, key: str) -> bool: ...

    def size(self, key: str) -> int: ...

    def open(self, key: str) -> BinaryIO:
        """Read a committed file."""
        ...

    def delete(self, key: str) -> bool:
        """Remove a file; True if it existed. Deleting a missing key is not an error."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Committed keys under ``prefix``, sorted."""
        ...


class _LocalUpload:
    def __init__(self, final: Path, key: str) -> None:
        self.key = key
        self._final = final
        final.parent.mkdir(parents=True, exist_ok=True)
        # Hidden, uniquely named, in the same directory: the rename stays atomic.
        self._temp = final.with_name(f".{final.name}.{uuid.uuid4().hex}{_PARTIAL_SUFFIX}")
        self._handle: BinaryIO | None = self._temp.open("xb")

    def write(self, data: bytes) -> None:
        if self._handle is None:
            raise RuntimeError(f"upload of {self.key} is already finished")
        self._handle.write(data)

    def commit(self) -> None:
        if self._handle is None:
            raise RuntimeError(f"upload of {self.key} is already finished")
        handle, self._handle = self._handle, None
        try:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            # link() refuses an existing target, unlike rename(): immutability for free.
            os.link(self._temp, self._final)
        except FileExistsError:
            self._discard()
            raise ExportConflict(f"{self.key} already exists and is immutable") from None
        except BaseException:
            self._discard()
            raise
        self._discard()
        _fsync_dir(self._final.parent)

    def abort(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self._discard()

    def _discard(self) -> None:
        self._temp.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalExportStore:
    """Files under one root directory; a key is a relative path below it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def for_settings(cls, settings: Settings) -> LocalExportStore:
        return cls(settings.data_dir / "exports")

    def path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    def begin(self, key: str) -> Upload:
        return _LocalUpload(self.path(key), key)

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def size(self, key: str) -> int:
        return self.path(key).stat().st_size

    def open(self, key: str) -> BinaryIO:
        return self.path(key).open("rb")

    def delete(self, key: str) -> bool:
        path = self.path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        _fsync_dir(path.parent)
        return True

    def list(self, prefix: str = "") -> list[str]:
        base = self.root.joinpath(*check_key(prefix).split("/")) if prefix else self.root
        if not base.is_dir():
            return []
        return sorted(self._walk(base))

    def _walk(self, base: Path) -> Iterator[str]:
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if name.startswith("."):  # partial uploads are never visible
                    continue
                yield Path(dirpath, name).relative_to(self.root).as_posix()

    def sweep_partials(self, older_than: float = 3600.0) -> int:
        """Remove uploads abandoned by killed writers; returns how many were removed.

        ``older_than`` (seconds) protects uploads still being written by live exports.
        """
        if not self.root.is_dir():
            return 0
        cutoff = time.time() - older_than
        removed = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                if name.startswith(".") and name.endswith(_PARTIAL_SUFFIX):
                    path = Path(dirpath, name)
                    try:
                        if path.stat().st_mtime <= cutoff:
                            path.unlink()
                            removed += 1
                    except FileNotFoundError:
                        continue
        return removed
