"""Run the sandbox as a process of its own (benchmarks, demos: it then has its own core).

Place in the pipeline: the benchmark measures a fetch process against a sandbox
process, so generating the snapshot never competes with parsing it for one interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from types import TracebackType


@dataclass
class SandboxProcess:
    process: subprocess.Popen[str]
    base_url: str

    def feed_url(self, name: str, query: str = "") -> str:
        return f"{self.base_url}/feeds/{name}" + (f"?{query}" if query else "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def spawn_sandbox(*options: str) -> SandboxProcess:
    """Start ``python -m herald.ingest.sandbox --port 0 *options``; wait for its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "herald.ingest.sandbox", "--port", "0", *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("http://"):
        process.kill()
        process.wait()
        process.stdout.close()
        raise RuntimeError(f"the sandbox did not start (it printed {line!r})")
    return SandboxProcess(process, line)
