"""Worker processes under a supervisor that restarts the ones that die.

Each worker is a real ``python -m herald --app faults.app:APP worker`` process. Every
fault and every restart is written to the event log with its wall-clock time and pid:
the checker measures orphan times from these deaths.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Event:
    at: float  # wall-clock seconds (the database runs on the same clock)
    action: str  # start, kill, stop, cont, term, exit, pg_crash, pg_start, ...
    pid: int | None = None
    detail: str = ""


@dataclass
class Slot:
    """One place for a worker; a restart puts a new process in the same slot."""

    index: int
    proc: subprocess.Popen[bytes]
    log: IO[bytes] = field(repr=False)
    restart: bool = True  # False while a planned stop is in progress
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Supervisor:
    def __init__(
        self,
        env: dict[str, str],
        count: int,
        concurrency: int,
        log_dir: Path,
        events: list[Event],
        role: str = "worker",
    ) -> None:
        self.env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.role = role
        self.count = count
        self.concurrency = concurrency
        self.log_dir = log_dir
        self.events = events
        self.slots: list[Slot] = []
        # Extra environment of one slot's processes (e.g. its database through a proxy).
        self.slot_env: dict[int, dict[str, str]] = {}
        self.retired: list[Slot] = []
        self.spawned = 0
        self._watching = True

    def _spawn(self, index: int) -> Slot:
        self.spawned += 1
        log = (self.log_dir / f"{self.role}-{self.spawned}.log").open("wb")
        if self.role == "scheduler":  # short ticks, small batches: kills land mid-work
            role_args = ["scheduler", "--interval", "0.5", "--batch", "10"]
        else:
            role_args = ["worker", "--concurrency", str(self.concurrency)]
        cmd = [
            sys.executable,
            "-m",
            "herald",
            "--app",
            "faults.app:APP",
            "--log-level",
            "WARNING",
            *role_args,
        ]
        env = {**self.env, **self.slot_env.get(index, {})}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.events.append(Event(time.time(), "start", proc.pid, f"{self.role} {index}"))
        return Slot(index, proc, log)

    def start(self) -> None:
        self.slots = [self._spawn(i) for i in range(self.count)]

    async def watch(self) -> None:
        """Restart any worker that exited on its own or was killed."""
        while self._watching:
            for i, slot in enumerate(self.slots):
                if slot.alive or not slot.restart:
                    continue
                code = slot.proc.returncode
                self.events.append(Event(time.time(), "exit", slot.pid, f"code {code}"))
                slot.log.close()
                self.retired.append(slot)
                if time.monotonic() - slot.started < 1.0:
                    await asyncio.sleep(0.5)  # failing at boot (database down?): do not spin
                self.slots[i] = self._spawn(i)
            await asyncio.sleep(0.1)

    def _signal(self, index: int, sig: signal.Signals, action: str) -> int:
        slot = self.slots[index]
        with contextlib.suppress(ProcessLookupError):
            os.kill(slot.pid, sig)
        self.events.append(Event(time.time(), action, slot.pid, f"{self.role} {index}"))
        return slot.pid

    def kill(self, index: int) -> int:
        return self._signal(index, signal.SIGKILL, "kill")

    def pause(self, index: int) -> int:
        return self._signal(index, signal.SIGSTOP, "stop")

    def resume(self, index: int) -> int:
        return self._signal(index, signal.SIGCONT, "cont")

    async def replace(self, index: int, settle: float, grace: float) -> None:
        """Graceful replacement: start the successor, then SIGTERM the old worker."""
        old = self.slots[index]
        old.restart = False
        successor = self._spawn(index)
        await asyncio.sleep(settle)  # let the successor boot and start claiming
        self.slots[index] = successor
        with contextlib.suppress(ProcessLookupError):
            old.proc.send_signal(signal.SIGTERM)
        self.events.append(Event(time.time(), "term", old.pid, f"slot {index}"))
        try:
            await asyncio.to_thread(old.proc.wait, grace + 10)
        except subprocess.TimeoutExpired:
            old.proc.kill()
            self.events.append(Event(time.time(), "kill", old.pid, "did not stop in time"))
        old.proc.wait()
        self.events.append(Event(time.time(), "exit", old.pid, f"code {old.proc.returncode}"))
        old.log.close()
        self.retired.append(old)

    def stop(self) -> None:
        """End of run: stop every worker (SIGCONT first: a stopped one cannot act)."""
        self._watching = False
        for slot in self.slots:
            if slot.alive:
                with contextlib.suppress(ProcessLookupError):
                    slot.proc.send_signal(signal.SIGCONT)
                    slot.proc.terminate()
        for slot in self.slots:
            try:
                slot.proc.wait(15)
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait(5)
            slot.log.close()

    def output(self, tail: int = 2000) -> str:
        parts = []
        for slot in [*self.retired, *self.slots]:
            path = Path(slot.log.name)
            if path.exists():
                text = path.read_text(errors="replace")[-tail:]
                if text.strip():
                    parts.append(f"--- pid {slot.pid} ---\n{text}")
        return "\n".join(parts)
