"""Where dataset sources may read, and the checks that keep them there.

A source reads what gets published, so its reach is the reach of whoever registers it:

- **files** (csv, jsonl) are read only under one configured directory
  (``HERALD_SOURCE_DIR``, default ``<data dir>/sources``): paths are resolved (``..`` and
  symlinks followed) and must stay inside it, never under ``/proc``, ``/sys`` or
  ``/dev``, and name a regular file; the open file is checked again, so a symlink
  swapped in between is caught;
- **databases** (postgres_query, postgres_table) are read as a separate least-privilege
  role (``HERALD_SOURCE_DATABASE_URL``), never Herald's own and never a superuser,
  that reads no table outside the allow-listed schemas (``HERALD_SOURCE_SCHEMAS``), in
  a READ ONLY transaction with statement and idle-in-transaction timeouts. See
  docs/security.md for how to create that role.

Errors name what was wrong, never a file's contents or the server's environment.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from herald import sql
from herald.catalog.errors import SourceError
from herald.config import ConfigError, Settings
from herald.rows import MissingRow

FORBIDDEN_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
FILE_TYPES = ("csv", "jsonl")
DATABASE_TYPES = ("postgres_query", "postgres_table")


@dataclass(frozen=True)
class SourceAccess:
    directory: Path
    database_url: str | None = None
    schemas: tuple[str, ...] = ("public",)
    statement_timeout: float = 300.0  # seconds, per statement (each FETCH of a cursor)
    idle_timeout: float = 60.0  # seconds a source transaction may sit idle
    herald_conninfo: str | None = None  # Herald's own database: its role is refused

    @classmethod
    def for_settings(
        cls, settings: Settings, herald_conninfo: str | None = None, environ: Any = None
    ) -> SourceAccess:
        env = dict(os.environ if environ is None else environ)
        schemas = tuple(
            s.strip() for s in (env.get("HERALD_SOURCE_SCHEMAS") or "public").split(",")
        )
        if not all(schemas):
            raise ConfigError("HERALD_SOURCE_SCHEMAS is a comma-separated list of schemas")

        def seconds(name: str, default: float) -> float:
            raw = env.get(name)
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise ConfigError(f"{name} must be seconds, got {raw!r}") from None
            if value <= 0:
                raise ConfigError(f"{name} must be positive")
            return value

        return cls(
            directory=Path(env.get("HERALD_SOURCE_DIR") or settings.data_dir / "sources"),
            database_url=env.get("HERALD_SOURCE_DATABASE_URL") or None,
            schemas=schemas,
            statement_timeout=seconds("HERALD_SOURCE_STATEMENT_TIMEOUT", 300.0),
            idle_timeout=seconds("HERALD_SOURCE_IDLE_TIMEOUT", 60.0),
            herald_conninfo=herald_conninfo,
        )

    # --- files ---------------------------------------------------------------------------

    def file(self, given: str) -> Path:
        """The regular file ``given`` names under the source directory (SourceError if not)."""
        root = self.directory.resolve()
        candidate = Path(given)
        path = (candidate if candidate.is_absolute() else root / candidate).resolve()
        if any(path.is_relative_to(bad) for bad in FORBIDDEN_ROOTS) or not path.is_relative_to(
            root
        ):
            raise SourceError(
                f"source file {given!r} is outside the source directory "
                "(HERALD_SOURCE_DIR); only files under it can be published"
            )
        try:
            mode = path.stat().st_mode
        except OSError:
            raise SourceError(
                f"source file {given!r} does not exist in the source directory"
            ) from None
        if not stat.S_ISREG(mode):
            raise SourceError(f"source file {given!r} is not a regular file")
        return path

    def open_file(self, path: Path) -> IO[str]:
        """Open a checked file, and check what was opened (a swapped symlink is refused)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise SourceError(f"cannot read source file {path.name}: {exc.strerror}") from None
        try:
            opened = (
                Path(os.readlink(f"/proc/self/fd/{fd}")) if Path("/proc/self/fd").is_dir() else path
            )
            if not stat.S_ISREG(os.fstat(fd).st_mode) or not opened.is_relative_to(
                self.directory.resolve()
            ):
                raise SourceError(f"source file {path.name} changed while it was opened")
            os.set_blocking(fd, True)
            return open(fd, encoding="utf-8-sig", newline="")  # a byte-order mark is skipped
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise

    # --- databases -------------------------------------------------------------------------

    def conninfo(self) -> str:
        if not self.database_url:
            raise SourceError(
                "database sources need HERALD_SOURCE_DATABASE_URL: a read-only role of "
                "their own (see docs/security.md), never Herald's"
            )
        params = conninfo_to_dict(self.database_url)
        options = " ".join(
            [
                str(params.get("options") or ""),
                "-c default_transaction_read_only=on",
                f"-c statement_timeout={int(self.statement_timeout * 1000)}",
                f"-c idle_in_transaction_session_timeout={int(self.idle_timeout * 1000)}",
                "-c search_path=" + ",".join(f'"{s}"' for s in self.schemas),
            ]
        ).strip()
        params["options"] = options
        params["application_name"] = "herald-source"
        return make_conninfo("", **params)

    def check_role(self, conn: psycopg.Connection[Any]) -> None:
        """Refuse to read as a role that can reach more than the allow-listed schemas."""
        row = conn.execute(
            sql.query("catalog_source_role_check"), {"schemas": list(self.schemas)}
        ).fetchone()
        if row is None:  # an aggregate: it always answers one row
            raise MissingRow("statement 'catalog_source_role_check' answered no row")
        role, superuser, bypass_rls, builtin, elsewhere = row
        herald_role = self._herald_role()
        if superuser:
            raise SourceError(f"database sources refuse to run as the superuser {role!r}")
        if herald_role is not None and role == herald_role:
            raise SourceError(f"database sources refuse to run as Herald's own role {role!r}")
        if bypass_rls or builtin:
            granted = ", ".join(builtin) or "BYPASSRLS"
            raise SourceError(f"the source role {role!r} holds {granted}: give it none of them")
        if elsewhere:
            raise SourceError(
                f"the source role {role!r} can read tables outside the allowed schemas "
                f"({', '.join(self.schemas)}), e.g. {', '.join(elsewhere)}"
            )

    def _herald_role(self) -> str | None:
        if self.herald_conninfo is None:
            return None
        with psycopg.connect(self.herald_conninfo, autocommit=True) as own:
            found = own.execute(sql.query("catalog_current_role")).fetchone()
        return None if found is None else str(found[0])

    def check(self, spec: dict[str, Any]) -> None:
        """Refuse, at registration, a source that cannot work (missing file, no role)."""
        kind = spec.get("type")
        if kind in FILE_TYPES:
            self.file(str(spec.get("path", "")))
        elif kind in DATABASE_TYPES:
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=10) as conn:
                    self.check_role(conn)
            except psycopg.Error as exc:
                raise SourceError(
                    f"cannot connect as the source role: {type(exc).__name__}"
                ) from None


class Cancellation:
    """Cancels, on the server, the source queries of an export that must stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: list[psycopg.Connection[Any]] = []
        self.cancelled = False

    def watch(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            self._conns.append(conn)
            cancelled = self.cancelled
        if cancelled:
            self._cancel(conn)

    def forget(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._conns.remove(conn)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            conns = list(self._conns)
        for conn in conns:
            self._cancel(conn)

    @staticmethod
    def _cancel(conn: psycopg.Connection[Any]) -> None:
        with contextlib.suppress(psycopg.Error, OSError):
            conn.cancel_safe(timeout=10)
