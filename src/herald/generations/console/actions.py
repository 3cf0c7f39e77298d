"""The safe actions of a partition in the console, each reviewed, reasoned and audited.

They are the operator API's own (:func:`herald.generations.operator.act` and
:func:`herald.generations.quarantine.resolve`), which check the record's state, act and
write the audit record in one transaction with the signed-in key as the actor. Targets
name where they live, so the console can return to the partition:

* a candidate: ``<dataset>/<partition>/<candidate id>`` (publish, override, discard);
* a run's task: ``<dataset>/<partition>/<run id>`` (skip, retry);
* a quarantined item: ``<dataset>/<partition or ->/<item id>`` (repair, replay, discard).

Neither a dataset's nor a partition's name can hold a ``/``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from herald.console import Action, Caller, Done
from herald.console.registry import PerformFn, Skip, per_target
from herald.generations import operator, quarantine
from herald.generations.console.reads import session
from herald.generations.rows import CandidateState, QuarantineItem, TaskState
from herald.rows import fetch_one

NO_PARTITION = "-"
# The names the generations API accepts (a dataset's, a partition's): no "/" in either.
DATASET = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")
PARTITION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")
R = TypeVar("R")
Loader = Callable[[Caller, str], Awaitable[R | None]]


class _Stated(Protocol):
    @property
    def state(self) -> str: ...


S = TypeVar("S", bound=_Stated)


@dataclass(frozen=True)
class CandidateReview:
    """A candidate with its run and the coordinator's last word on it
    (``generations_console_candidate``)."""

    id: int
    run_id: int
    dataset: str
    partition: str
    state: CandidateState
    row_count: int
    checksum: str
    job_id: int
    fence: int
    policy: str
    purpose: str
    decision: str | None
    reason_code: str | None
    reason: str | None


@dataclass(frozen=True)
class TaskReview:
    """A run's task with its job (``generations_console_task``)."""

    run_id: int
    partition: str
    state: TaskState
    detail: str | None
    job_id: int | None
    dataset: str
    purpose: str
    definition_version: str
    policy: str
    job_state: str | None
    lease_owner: str | None
    fence: int | None


@dataclass(frozen=True)
class Target:
    dataset: str
    partition: str
    ident: int

    @property
    def page(self) -> str:
        if self.partition == NO_PARTITION:
            return f"/generations/{self.dataset}"
        return f"/generations/{self.dataset}/partitions/{self.partition}"


def parse(target: str) -> Target | None:
    parts = target.split("/")
    if len(parts) != 3 or not parts[2].isdigit() or len(parts[2]) > 18:
        return None
    dataset, partition, ident = parts
    if not DATASET.match(dataset):
        return None
    if partition != NO_PARTITION and not PARTITION.match(partition):
        return None
    return Target(dataset, partition, int(ident))


def _back(targets: Sequence[str]) -> str:
    found = parse(targets[0]) if targets else None
    return found.page if found is not None else "/generations"


def scopes(caller: Caller) -> frozenset[str]:
    return frozenset(s for s in ("operate", "admin") if caller.allows(s))


# --- candidates: publish, override, discard ----------------------------------------------


def _loader(
    statement: str,
    cls: type[R],
    params: Callable[[Target], dict[str, object]],
    belongs: Callable[[R, Target], bool],
) -> Loader[R]:
    """A target's record: the statement's row for the parsed target, or None when the
    target does not parse, names nothing, or names a record of another place (the
    target's dataset and partition must be the record's own)."""

    async def load(caller: Caller, target: str) -> R | None:
        found = parse(target)
        if found is None:
            return None
        async with session(caller) as (_, conn):
            row = await fetch_one(conn, statement, params(found), cls)
        return row if row is not None and belongs(row, found) else None

    return load


_candidate = _loader(
    "generations_console_candidate",
    CandidateReview,
    lambda found: {"id": found.ident},
    lambda row, found: (row.dataset, row.partition) == (found.dataset, found.partition),
)


def _named(row: CandidateReview) -> str:
    return f"candidate {row.id} of {row.dataset}/{row.partition} (run {row.run_id})"


def _last_word(row: CandidateReview) -> str:
    return f"the coordinator's last word: {row.reason}" if row.reason else "no decision yet"


def _only_when(
    state: str, named: Callable[[S], str], effect: Callable[[S], str]
) -> Callable[[Caller, S], str | Skip]:
    """A verdict: ``effect`` on a record in ``state``; any other is left alone, and why."""

    def check(caller: Caller, row: S) -> str | Skip:
        if row.state != state:
            return Skip(f"{named(row)} is {row.state}, not {state}: nothing to do")
        return effect(row)

    return check


def _waiting(
    effect: Callable[[CandidateReview], str],
) -> Callable[[Caller, CandidateReview], str | Skip]:
    return _only_when("waiting", _named, effect)


def _publish_effect(row: CandidateReview) -> str:
    return (
        f"Ask the coordinator to decide on {_named(row)} again now ({_last_word(row)}): it "
        "becomes the next generation if the rules allow it today; if they do not, the "
        "decision and its reason are recorded and nothing is published."
    )


def _override_effect(row: CandidateReview) -> str:
    return (
        f"Publish {_named(row)} as the next generation despite the coordinator's rules "
        f"({_last_word(row)}). The pre-publication checks (checksum, partitions, schema, "
        "row counts, quality) still apply; readers and subscribers see the new generation."
    )


def _discard_effect(row: CandidateReview) -> str:
    return (
        f"Discard {_named(row)}: it will never be published and its run's task settles "
        f"as discarded ({_last_word(row)}). The current generation stays as it is."
    )


async def _act(caller: Caller, action: str, found: Target, reason: str, on: str) -> dict[str, Any]:
    """The operator API's action on a candidate (``on="candidate_id"``) or a run's task."""
    async with session(caller) as (gens, conn):
        return await operator.act(
            gens,
            conn,
            action=action,
            dataset_name=found.dataset,
            partition=found.partition,
            scopes=scopes(caller),
            actor=caller.name,
            reason=reason,
            **{on: found.ident},
        )


def _target(target: str, what: str) -> Target:
    found = parse(target)
    if found is None:
        raise ValueError(f"{target!r} names no {what}")
    return found


def _on_candidate(action: str) -> PerformFn:
    async def perform(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
        found = _target(target, "candidate")
        decision = (await _act(caller, action, found, reason, "candidate_id"))["decision"]
        said = f"candidate {found.ident}: {decision['decision']} ({decision['reason']})"
        if decision["generation"] is not None:
            page = f"{found.page}/generations/{decision['generation']}"
            return Done(f"{said}: generation {decision['generation']}", page)
        return Done(said, found.page)

    return perform


# --- a run's task: skip, retry -----------------------------------------------------------


_task = _loader(
    "generations_console_task",
    TaskReview,
    lambda found: {"run_id": found.ident, "partition": found.partition},
    lambda row, found: row.dataset == found.dataset,
)


def _task_named(row: TaskReview) -> str:
    return f"run {row.run_id}'s task for {row.dataset}/{row.partition}"


def _skip_verdict(caller: Caller, row: TaskReview) -> str | Skip:
    if not row.state.unsettled:
        return Skip(f"{_task_named(row)} is {row.state}: nothing to skip")
    job = f"job {row.job_id} ({row.job_state})" if row.job_id else "its job"
    return (
        f"Skip {_task_named(row)}: cancel {job} and settle the task as skipped, so no "
        "output of this run for the partition is published. A worker still holding its "
        "lease is fenced off: whatever it reports later is refused."
    )


def _retry_verdict(caller: Caller, row: TaskReview) -> str | Skip:
    if not row.state.failed:
        return Skip(f"{_task_named(row)} is {row.state}: nothing to retry")
    return (
        f"Retry {_task_named(row)} ({row.state}: {row.detail}): declare a repair run "
        f"of the partition with definition {row.definition_version}, reading every "
        "input accepted for it now, planned against the current generation (policy "
        "rebase). The failed run stays as it is, for the record."
    )


def _on_task(action: str) -> PerformFn:
    async def perform(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
        found = _target(target, "task")
        after = (await _act(caller, action, found, reason, "run_id"))["after"]
        if action == "retry":
            return Done(
                f"run {found.ident}: repair run {after['run']} declared",
                f"/generations/runs/{after['run']}",
            )
        return Done(f"run {found.ident}: task for {found.partition} skipped", found.page)

    return perform


# --- quarantined input: repair, replay, discard ------------------------------------------


_item = _loader(
    "generations_console_quarantine_item",
    QuarantineItem,
    lambda found: {"id": found.ident},
    lambda row, found: (
        (row.dataset, row.partition or NO_PARTITION) == (found.dataset, found.partition)
    ),
)


def _item_named(row: QuarantineItem) -> str:
    where = f"/{row.partition}" if row.partition else ""
    return f"quarantined item {row.id} of {row.dataset}{where} ({row.reason_code})"


def _held(
    effect: Callable[[QuarantineItem], str],
) -> Callable[[Caller, QuarantineItem], str | Skip]:
    return _only_when("held", _item_named, effect)


def _repair_effect(row: QuarantineItem) -> str:
    return (
        f"Mark {_item_named(row)} as repaired (its source fixed the input elsewhere): it "
        "leaves the quarantine; nothing is rebuilt."
    )


def _replay_effect(row: QuarantineItem) -> str:
    if row.run_id is None or not row.partition:
        return (
            f"Release {_item_named(row)} as replayed: it names no run's task, so nothing is "
            "rebuilt; declare a run for its partition when the input is ready."
        )
    return (
        f"Release {_item_named(row)} and declare a repair run of {row.partition} that "
        f"reads every input accepted for it now (the run that met it was {row.run_id}), "
        "planned against the current generation (policy rebase)."
    )


def _drop_effect(row: QuarantineItem) -> str:
    return (
        f"Discard {_item_named(row)}: it leaves the quarantine and is never read again; "
        "the partition keeps its current generation."
    )


def _resolve(action: str) -> PerformFn:
    async def perform(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
        found = _target(target, "quarantined item")
        if await _item(caller, target) is None:
            raise ValueError(f"{target!r} names no quarantined item")
        async with session(caller) as (gens, conn):
            after = await quarantine.resolve(
                gens, conn, found.ident, action, actor=caller.name, reason=reason
            )
        if after.get("replay_run"):
            return Done(
                f"item {found.ident}: replayed as repair run {after['replay_run']}",
                f"/generations/runs/{after['replay_run']}",
            )
        return Done(f"item {found.ident}: {after['state']}", found.page)

    return perform


def _action(
    name: str,
    label: str,
    scope: str,
    title: str,
    what: str,
    load: Loader[R],
    verdict: Callable[[Caller, R], str | Skip],
    perform: PerformFn,
) -> Action:
    return Action(name, label, scope, per_target(title, what, load, verdict), perform, _back)


ACTIONS = (
    _action("gen_candidate.publish", "Publish", "operate", "Publish {}", "candidate",
            _candidate, _waiting(_publish_effect), _on_candidate("publish")),
    _action("gen_candidate.override", "Override and publish", "admin", "Override the rules for {}",
            "candidate", _candidate, _waiting(_override_effect), _on_candidate("override")),
    _action("gen_candidate.discard", "Discard", "operate", "Discard {}", "candidate",
            _candidate, _waiting(_discard_effect), _on_candidate("discard")),
    _action("gen_task.skip", "Skip", "operate", "Skip {}", "task", _task, _skip_verdict,
            _on_task("skip")),
    _action("gen_task.retry", "Retry", "operate", "Retry {}", "task", _task, _retry_verdict,
            _on_task("retry")),
    _action("gen_quarantine.repair", "Mark repaired", "operate", "Mark {} repaired",
            "quarantined item", _item, _held(_repair_effect), _resolve("repair")),
    _action("gen_quarantine.replay", "Replay", "operate", "Replay {}", "quarantined item",
            _item, _held(_replay_effect), _resolve("replay")),
    _action("gen_quarantine.discard", "Discard", "operate", "Discard {}", "quarantined item",
            _item, _held(_drop_effect), _resolve("discard")),
)  # fmt: skip
