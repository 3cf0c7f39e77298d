"""The API side of the SPARQL endpoint: a bounded pool of query processes.

Each query runs in a child process (:mod:`.child`) with its own memory and CPU limits,
so a crash, a runaway or a timeout ends that process only. The runner:

- refuses a query at once (503 with Retry-After) when ``concurrency`` queries already run;
- kills the process at the deadline (504), when the caller goes away (the route cancels
  the run), and when the API stops: a query never holds a shutdown up;
- reads the embedded store through snapshots: a consistent copy made (with hard links)
  after the store last changed, which a child opens read-only while this process keeps
  writing; a remote endpoint is queried by the child itself, under the same limits.

Results land in a spool file the route streams and removes; nothing is held in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from herald.catalog.sparql.guard import QueryRefused
from herald.catalog.triplestore import OxigraphStore, SparqlEndpointStore, TripleStore
from herald.config import ConfigError

log = logging.getLogger(__name__)

_STARTUP = 30.0  # seconds a new query process may take to be ready


def _number(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {raw!r}")
    return value


@dataclass(frozen=True)
class SparqlLimits:
    """Bounds of every query (``HERALD_SPARQL_*``); sizes in characters and bytes."""

    timeout: float = 10.0
    max_query: int = 10_000
    max_depth: int = 128
    max_rows: int = 100_000
    max_bytes: int = 32 * 1024 * 1024
    memory: int = 1024 * 1024 * 1024  # address space of one query process
    concurrency: int = 4
    retry_after: int = 2

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SparqlLimits:
        env = dict(os.environ if environ is None else environ)
        d = cls()
        return cls(
            timeout=_number(env, "HERALD_SPARQL_TIMEOUT", d.timeout),
            max_query=int(_number(env, "HERALD_SPARQL_MAX_QUERY", d.max_query)),
            max_depth=int(_number(env, "HERALD_SPARQL_MAX_DEPTH", d.max_depth)),
            max_rows=int(_number(env, "HERALD_SPARQL_MAX_ROWS", d.max_rows)),
            max_bytes=int(_number(env, "HERALD_SPARQL_MAX_BYTES", d.max_bytes)),
            memory=int(_number(env, "HERALD_SPARQL_MEMORY", d.memory)),
            concurrency=int(_number(env, "HERALD_SPARQL_CONCURRENCY", d.concurrency)),
        )


@dataclass
class Result:
    path: Path
    rows: int


class _Child:
    """One query process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, memory: int) -> _Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "herald.catalog.sparql.child",
            str(memory),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C is the runner's to handle
        )
        child = cls(proc)
        try:
            ready = await asyncio.wait_for(child.reply(), _STARTUP)
        except BaseException:
            child.kill()
            raise
        if not ready.get("ready"):
            child.kill()
            raise QueryRefused(503, "unavailable", "the query process did not start")
        return child

    async def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            raise EOFError
        found: dict[str, Any] = json.loads(line)
        return found

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        await self.proc.stdin.drain()
        return await self.reply()

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


@dataclass
class _Snapshot:
    path: Path
    generation: int
    users: int = 0


@dataclass
class _Snapshots:
    """Read-only copies of one embedded store, made when it changed since the last one."""

    root: Path
    current: _Snapshot | None = None
    retired: list[_Snapshot] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, store: OxigraphStore) -> _Snapshot:
        with self.lock:
            generation = store.generation
            if self.current is None or self.current.generation != generation:
                path = self.root / f"{generation}-{uuid.uuid4().hex[:8]}"
                store.backup(path)
                if self.current is not None:
                    self.retired.append(self.current)
                self.current = _Snapshot(path, generation)
            self.current.users += 1
            return self.current

    def release(self, snapshot: _Snapshot) -> None:
        with self.lock:
            snapshot.users -= 1
            for old in [s for s in self.retired if s.users <= 0]:
                self.retired.remove(old)
                shutil.rmtree(old.path, ignore_errors=True)


class QueryRunner:
    def __init__(self, limits: SparqlLimits, prefixes: dict[str, str]) -> None:
        self.limits = limits
        self.prefixes = prefixes
        self.spool = Path(tempfile.mkdtemp(prefix="herald-sparql-"))
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._running = 0
        self._snapshots: dict[Path, _Snapshots] = {}
        self._closed = False
        self._dying: set[_Child] = set()
        self._lock = threading.Lock()

    def _refuse_busy(self) -> QueryRefused:
        detail = f"{self.limits.concurrency} queries are running; try again shortly"
        return QueryRefused(503, "busy", detail, retry_after=self.limits.retry_after)

    async def run(
        self,
        store: TripleStore,
        query: str,
        form: str,
        media_type: str,
        graphs: list[str] | None = None,
    ) -> Result:
        """Run a checked query; its result file (the caller removes it) or QueryRefused.

        ``graphs``: the only named graphs the query may reach (a tenant's catalog and
        entries); None: every graph of the store."""
        if self._closed:
            raise QueryRefused(503, "unavailable", "the API is stopping")
        if self._running >= self.limits.concurrency:
            raise self._refuse_busy()
        self._running += 1
        snapshot: tuple[_Snapshots, _Snapshot] | None = None
        output = self.spool / f"{uuid.uuid4().hex}.out"
        try:
            request: dict[str, Any] = {
                "query": query,
                "form": form,
                "media_type": media_type,
                "output": str(output),
                "timeout": self.limits.timeout,
                "max_rows": self.limits.max_rows,
                "max_bytes": self.limits.max_bytes,
                "prefixes": self.prefixes,
                "graphs": graphs,
            }
            if isinstance(store, SparqlEndpointStore):
                request["endpoint"] = store.query_url
            elif isinstance(store, OxigraphStore) and store.path is not None:
                snapshot = await asyncio.to_thread(self._take, store)
                request["snapshot"] = str(snapshot[1].path)
            else:
                raise QueryRefused(503, "unavailable", "this triple store cannot be queried here")
            reply = await self._ask(request)
        except BaseException:
            output.unlink(missing_ok=True)
            raise
        finally:
            self._running -= 1
            if snapshot is not None:
                snapshot[0].release(snapshot[1])
        if not reply.get("ok"):
            output.unlink(missing_ok=True)
            raise QueryRefused(int(reply["status"]), str(reply["slug"]), str(reply["detail"]))
        return Result(output, int(reply.get("rows", 0)))

    def _take(self, store: OxigraphStore) -> tuple[_Snapshots, _Snapshot]:
        assert store.path is not None
        key = store.path.resolve()
        with self._lock:  # queries arrive together: one of them prepares the root
            snapshots = self._snapshots.get(key)
            if snapshots is None:
                root = key.parent / f"{key.name}-snapshots"
                shutil.rmtree(root, ignore_errors=True)  # left by an earlier run
                root.mkdir(parents=True)
                snapshots = self._snapshots[key] = _Snapshots(root)
        return snapshots, snapshots.take(store)

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            child = self._idle.pop() if self._idle else await _Child.start(self.limits.memory)
        except (OSError, EOFError, ValueError, TimeoutError) as exc:
            log.warning("a SPARQL query process could not start: %r", exc)
            raise QueryRefused(503, "unavailable", "the query process could not start") from None
        self._busy.add(child)
        finished = False
        try:
            reply = await asyncio.wait_for(child.ask(request), self.limits.timeout + 1.0)
            finished = True
            return reply
        except TimeoutError:
            raise QueryRefused(
                504, "timeout", f"the query ran longer than {self.limits.timeout:g} s"
            ) from None
        except (EOFError, ConnectionError, BrokenPipeError):
            code = await child.proc.wait()
            raise _died(code) from None
        finally:
            self._busy.discard(child)
            if finished and child.alive and not self._closed:
                self._idle.append(child)
            else:  # timed out, cancelled (client gone, shutdown) or dead: never reused
                child.kill()
                self._dying.add(child)
                self._reap()

    def _reap(self) -> None:
        for child in [c for c in self._dying if not c.alive]:
            self._dying.discard(child)

    async def close(self) -> None:
        self._closed = True
        for child in [*self._idle, *self._busy]:
            child.kill()
        for child in [*self._idle, *self._busy, *self._dying]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(child.proc.wait(), 5.0)
        self._idle.clear()
        self._dying.clear()
        shutil.rmtree(self.spool, ignore_errors=True)
        for snapshots in self._snapshots.values():
            shutil.rmtree(snapshots.root, ignore_errors=True)


def _died(code: int) -> QueryRefused:
    """What a query process's death means for the caller (the log says more)."""
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        return QueryRefused(504, "timeout", "the query used more CPU time than allowed")
    log.warning("a SPARQL query process died (exit %s)", code)
    return QueryRefused(
        422,
        "query-too-costly",
        "the query could not be evaluated within the endpoint's memory and stack limits",
    )
