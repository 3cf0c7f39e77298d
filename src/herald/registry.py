"""Job kinds: what a kind is called, where it runs, how it retries, what it does.

An application is a :class:`Herald` registry. Handlers are registered with decorators::

    app = Herald()

    @app.task("send_report", queue="mail", max_attempts=5)
    async def send_report(ctx, payload): ...

    publish = app.pipeline("publish", steps=["get_data", "persist_data"], keep_forever=True)

    @publish.step("get_data")
    async def get_data(ctx, payload): return {"files": [...]}   # merged into the checkpoint
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from herald.backoff import Backoff
from herald.errors import UnknownKind
from herald.hooks import Gate, MaintenanceHook, discovered_maintenance_hooks

if TYPE_CHECKING:
    from herald.context import JobContext

Payload = dict[str, Any]
Handler = Callable[["JobContext", Payload], Any]
Compensation = Callable[[dict[str, Any]], Any]
F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
DEFAULT_TIMEOUT = 3600.0
# Scopes an adapter (the HTTP API) may require to submit a kind; None marks it internal.
API_SCOPES = ("submit", "operate", "admin")


def _check_name(what: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{what} name must be 1-200 characters of letters, digits, _ . : -; got {name!r}"
        )
    return name


@dataclass
class Step:
    name: str
    handler: Handler
    is_async: bool


@dataclass
class Kind:
    """Everything the engine knows about one kind of job."""

    name: str
    queue: str = "default"
    max_attempts: int = 3
    priority: int = 0
    backoff: Backoff = field(default_factory=Backoff)
    timeout: float | None = DEFAULT_TIMEOUT
    retention: float | None = None  # seconds; None = the default; math.inf = keep forever
    steps: list[Step] = field(default_factory=list)
    compensate: Compensation | None = None
    pipeline: bool = False
    # Checked by the worker before each attempt, in order (see herald.hooks): e.g. the
    # rate and concurrency limits of herald.ops.limits.declare, under the name "limits".
    gates: dict[str, Gate] = field(default_factory=dict)
    # The API scope a caller needs to submit (or schedule) this kind over HTTP; None: an
    # internal kind that only its own application code enqueues.
    api_scope: str | None = "submit"

    def first_step_index(self, step: str | None) -> int:
        """Index of the step to run, given the job's saved current step."""
        if step is None:
            return 0
        for index, candidate in enumerate(self.steps):
            if candidate.name == step:
                return index
        raise LookupError(f"job is at step {step!r}, which kind {self.name!r} does not declare")


class Pipeline:
    """Builder returned by :meth:`Herald.pipeline`; register steps in any order."""

    def __init__(self, kind: Kind, declared: list[str]) -> None:
        self.kind = kind
        self._declared = declared
        self._handlers: dict[str, Step] = {}

    def step(self, name: str) -> Callable[[F], F]:
        if name not in self._declared:
            raise ValueError(f"step {name!r} is not one of {self._declared} for {self.kind.name!r}")

        def register(fn: F) -> F:
            if name in self._handlers:
                raise ValueError(f"step {name!r} of {self.kind.name!r} is registered twice")
            self._handlers[name] = Step(name, fn, inspect.iscoroutinefunction(fn))
            if len(self._handlers) == len(self._declared):
                self.kind.steps = [self._handlers[n] for n in self._declared]
            return fn

        return register

    def compensate(self, fn: F) -> F:
        """Idempotent cleanup for a dead attempt, given its dead-letter record."""
        self.kind.compensate = fn
        return fn


@dataclass(frozen=True)
class Duty:
    """A periodic housekeeping task of an application (sweeping, reconciling...): run
    every ``every`` seconds by one process of the deployment at a time (see
    :mod:`herald.ops.housekeeping`). ``run()`` may be sync or async and must be safe to
    repeat, and safe if a pass of another process overlaps it."""

    name: str
    every: float
    run: Callable[[], Any]


class Herald:
    """A registry of job kinds: the application object workers and clients share."""

    def __init__(self) -> None:
        self._kinds: dict[str, Kind] = {}
        self._pipelines: dict[str, Pipeline] = {}
        self._duties: dict[str, Duty] = {}
        self._maintenance_hooks: dict[str, MaintenanceHook] = {}

    def _add(self, kind: Kind) -> Kind:
        _check_name("kind", kind.name)
        _check_name("queue", kind.queue)
        if kind.name in self._kinds:
            raise ValueError(f"kind {kind.name!r} is registered twice")
        if not 1 <= kind.max_attempts <= 1000:
            raise ValueError("max_attempts must be between 1 and 1000")
        if kind.timeout is not None and kind.timeout <= 0:
            raise ValueError("timeout must be positive (or None for no timeout)")
        if kind.api_scope is not None and kind.api_scope not in API_SCOPES:
            raise ValueError(f"api_scope must be one of {', '.join(API_SCOPES)} or None")
        self._kinds[kind.name] = kind
        return kind

    def task(
        self,
        name: str,
        *,
        queue: str = "default",
        max_attempts: int = 3,
        priority: int = 0,
        backoff: Backoff | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retention: float | None = None,
        keep_forever: bool = False,
        api_scope: str | None = "submit",
    ) -> Callable[[F], F]:
        """Register a plain task: one handler ``fn(ctx, payload)``, sync or async.

        ``api_scope`` is the scope an API key needs to submit it over HTTP; None keeps
        the kind internal (only application code enqueues it)."""

        def register(fn: F) -> F:
            kind = Kind(
                name=name,
                queue=queue,
                max_attempts=max_attempts,
                priority=priority,
                backoff=backoff or Backoff(),
                timeout=timeout,
                retention=math.inf if keep_forever else retention,
                steps=[Step("run", fn, inspect.iscoroutinefunction(fn))],
                api_scope=api_scope,
            )
            self._add(kind)
            return fn

        return register

    def pipeline(
        self,
        name: str,
        *,
        steps: list[str],
        queue: str = "default",
        max_attempts: int = 3,
        priority: int = 0,
        backoff: Backoff | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retention: float | None = None,
        keep_forever: bool = False,
        api_scope: str | None = "submit",
    ) -> Pipeline:
        """Register a pipeline of ordered steps; a retry resumes at the first unfinished one."""
        if not steps or len(set(steps)) != len(steps):
            raise ValueError("a pipeline needs one or more distinct step names")
        for step in steps:
            _check_name("step", step)
        kind = self._add(
            Kind(
                name=name,
                queue=queue,
                max_attempts=max_attempts,
                priority=priority,
                backoff=backoff or Backoff(),
                timeout=timeout,
                retention=math.inf if keep_forever else retention,
                pipeline=True,
                api_scope=api_scope,
            )
        )
        builder = Pipeline(kind, list(steps))
        self._pipelines[name] = builder
        return builder

    def duty(self, name: str, *, every: float) -> Callable[[F], F]:
        """Register a housekeeping duty ``fn()`` run every ``every`` seconds (see
        :class:`Duty`)."""
        _check_name("duty", name)
        if not every > 0:
            raise ValueError("a duty's interval must be positive")

        def register(fn: F) -> F:
            if name in self._duties:
                raise ValueError(f"duty {name!r} is registered twice")
            self._duties[name] = Duty(name, float(every), fn)
            return fn

        return register

    def duties(self) -> list[Duty]:
        return list(self._duties.values())

    def gate(self, kind: str, name: str, gate: Gate | None) -> None:
        """Set (or, with None, remove) the admission gate ``name`` of ``kind``: run by
        the worker before each attempt's handler, it may raise Snooze (see herald.hooks)."""
        found = {k.name: k for k in self._kinds.values()}
        if kind not in found:
            raise ValueError(f"kind {kind!r} is not registered (known: {', '.join(sorted(found))})")
        if gate is None:
            found[kind].gates.pop(name, None)
        else:
            found[kind].gates[name] = gate

    def maintenance_hook(self, hook: MaintenanceHook) -> MaintenanceHook:
        """Prune ``hook``'s state in every worker's maintenance pass (see herald.hooks)."""
        _check_name("maintenance hook", hook.name)
        if hook.name in self._maintenance_hooks:
            raise ValueError(f"maintenance hook {hook.name!r} is registered twice")
        self._maintenance_hooks[hook.name] = hook
        return hook

    def maintenance_hooks(self) -> list[MaintenanceHook]:
        """The installed packages' hooks, then the application's own."""
        found = {hook.name: hook for hook in discovered_maintenance_hooks()}
        for name, hook in self._maintenance_hooks.items():
            if name in found:
                raise ValueError(f"maintenance hook {name!r} is also installed as an entry point")
            found[name] = hook
        return list(found.values())

    def kind(self, name: str) -> Kind:
        try:
            kind = self._kinds[name]
        except KeyError:
            raise UnknownKind(name, list(self._kinds)) from None
        if kind.pipeline and not kind.steps:
            raise ValueError(f"pipeline {name!r} has steps declared but not all registered")
        return kind

    def kinds(self) -> list[Kind]:
        return list(self._kinds.values())

    def queues(self) -> list[str]:
        return sorted({k.queue for k in self._kinds.values()})


async def call(fn: Handler, is_async: bool, ctx: JobContext, payload: Payload) -> Any:
    """Run a handler: coroutines inline, plain functions on the worker's thread pool."""
    if is_async:
        return await fn(ctx, payload)
    loop = ctx.loop
    result = await loop.run_in_executor(ctx.executor, fn, ctx, payload)
    if inspect.isawaitable(result):
        return await result
    return result
