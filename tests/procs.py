"""Real ``herald worker`` subprocesses for multi-process tests.

Each worker runs ``python -m herald --app tests.support:APP worker`` from the repository
root with its settings in ``HERALD_*`` variables; its output goes to a file under the
test's tmp_path so a failing test can show what every worker said.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

from herald.config import Settings
from tests.eventually import eventually

ROOT = Path(__file__).resolve().parent.parent
_STARTED = re.compile(r"worker (\S+) started on queues")
T = TypeVar("T")


def herald_command(
    env: Mapping[str, str], *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run ``herald ARGS`` as a user would (from the repository root), to completion."""
    return subprocess.run(
        [sys.executable, "-m", "herald", *args],
        env=dict(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class WorkerProcess:
    """One worker subprocess and the file that holds its output."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            self.proc.send_signal(sig)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def owner(self) -> str | None:
        """The lease owner name this worker announced at start, once it has."""
        found = _STARTED.search(self.output())
        return found.group(1) if found else None

    async def started(self, within: float = 60.0) -> str:
        """Wait until the worker runs; returns its lease owner name."""

        async def probe() -> str | None:
            if not self.alive:
                raise AssertionError(f"{self.name} exited early:\n{self.output()[-4000:]}")
            return self.owner()

        return await wait_for(probe, within, f"{self.name} to start")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (graceful), then SIGKILL if it does not exit in time; returns the code."""
        if self.alive:
            self.proc.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return int(self.proc.returncode)


class Workers:
    """Starts worker subprocesses against one schema and stops all of them at the end."""

    def __init__(
        self,
        settings: Settings,
        database_url: str,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.started: list[WorkerProcess] = []
        self.env = {
            "HERALD_DATABASE_URL": database_url,
            "HERALD_SCHEMA": settings.schema,
            "HERALD_LEASE": str(settings.lease),
            "HERALD_HEARTBEAT": str(settings.heartbeat_interval),
            "HERALD_POLL_INTERVAL": str(settings.poll_interval),
            "HERALD_RESCUE_INTERVAL": str(settings.rescue_interval),
            "HERALD_SHUTDOWN_GRACE": "5",
            **(env or {}),
        }

    def start(self, *args: str, concurrency: int = 4) -> WorkerProcess:
        """Start one more worker; ``args`` are extra ``herald worker`` options."""
        number = len(self.started) + 1
        while (self.log_dir / f"worker-{number}.log").exists():  # another group's
            number += 1
        name = f"worker-{number}"
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("wb")
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        cmd = [
            sys.executable,
            "-m",
            "herald",
            "--app",
            "tests.support:APP",
            "worker",
            "--concurrency",
            str(concurrency),
            *args,
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        worker = WorkerProcess(name, proc, log_path, log)
        self.started.append(worker)
        return worker

    def stop_all(self) -> None:
        for worker in self.started:  # all at once: they drain in parallel
            worker.signal(signal.SIGCONT)
            worker.signal(signal.SIGTERM)
        for worker in self.started:
            worker.stop()

    def report(self, tail: int = 4000) -> str:
        """The end of every worker's output, for a failure message."""
        parts = []
        for w in self.started:
            code = "running" if w.alive else f"exit {w.proc.returncode}"
            parts.append(f"--- {w.name} (pid {w.pid}, {code}) ---\n{w.output()[-tail:]}")
        return "\n".join(parts)


async def wait_for(
    probe: Callable[[], Awaitable[T | None]],
    within: float,
    what: str,
    workers: Workers | None = None,
    interval: float = 0.1,
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with the workers' output."""
    report = workers.report if workers is not None else None
    found = await eventually(probe, what=what, within=within, interval=interval, report=report)
    assert found is not None
    return found
