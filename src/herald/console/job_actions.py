"""The engine's manual actions on jobs and dead letters, as console actions.

Each review says, per target, what the action will do (or why it will not); each
perform calls the engine's own function (:mod:`herald.ops`), which checks the state,
changes it and writes the audit record in one transaction, with the caller's key as the
actor. The console adds nothing to the database of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from herald.console.registry import Action, Done, Option, Skip, per_target
from herald.console.render import when
from herald.console.sessions import Caller
from herald.console.web import identifier
from herald.errors import UnknownKind
from herald.ops import deadletters
from herald.ops import jobs as job_ops
from herald.ops.deadletters import CleanupState, DeadLetter
from herald.ops.errors import NotFound
from herald.rows import Job
from herald.states import JobState


def _object(row: Job | DeadLetter) -> str:
    return f"{row.kind}/{row.key}" if row.key else f"{row.kind} (no key)"


# --- jobs ---------------------------------------------------------------------------------


async def _job(caller: Caller, target: str) -> Job | None:
    return await caller.state.client.get_job(identifier(target, "job id"))


def _cancel_verdict(caller: Caller, job: Job) -> str | Skip:
    if job.state == JobState.RUNNING:
        return (
            f"Cancel job {job.id} ({_object(job)}), running on {job.lease_owner} "
            f"under fence {job.fence}: its lease ends now, the handler is stopped at "
            "its next heartbeat and every later write of that worker is refused."
        )
    if job.state == JobState.WAITING:
        return (
            f"Cancel job {job.id} ({_object(job)}), waiting at attempt "
            f"{job.attempt} of {job.max_attempts}: it will never run."
        )
    return Skip(f"job {job.id} is {job.state}: only waiting or running jobs")


async def _cancel(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> str:
    job_id = identifier(target, "job id")
    await job_ops.cancel(caller.state.client.pool, job_id, actor=caller.name, reason=reason)
    return f"job {job_id} cancelled"


def _retry_verdict(caller: Caller, job: Job) -> str | Skip:
    if job.state != JobState.WAITING:
        return Skip(f"job {job.id} is {job.state}: only a waiting job can be retried")
    return (
        f"Make job {job.id} ({_object(job)}) due now instead of at "
        f"{when(job.run_at)}; its attempt count ({job.attempt} of "
        f"{job.max_attempts}) stays."
    )


async def _retry(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> str:
    job_id = identifier(target, "job id")
    settings = caller.state.settings
    await job_ops.retry_now(
        caller.state.client.pool,
        job_id,
        actor=caller.name,
        reason=reason,
        channel=settings.channel if settings.notify else None,
    )
    return f"job {job_id} is due now"


# --- dead letters -------------------------------------------------------------------------


async def _dead(caller: Caller, target: str) -> DeadLetter | None:
    try:
        return await deadletters.get(caller.state.client.pool, identifier(target, "dead letter id"))
    except NotFound:
        return None


def _replay_verdict(caller: Caller, dead: DeadLetter) -> str | Skip:
    try:
        attempts = caller.state.app.kind(dead.kind).max_attempts
    except UnknownKind:
        return Skip(f"dead letter {dead.id}: this application has no kind {dead.kind!r}")
    again = f" (it was replayed before, as job {dead.replayed_job_id})"
    return (
        f"Enqueue a new {_object(dead)} job on queue {dead.queue} with the dead job's "
        f"payload and a fresh budget of {attempts} attempts, as a replay of job "
        f"{dead.job_id}" + (again if dead.replayed_job_id else "") + ". The dead "
        "letter stays, with its cleanup state."
    )


async def _replay(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
    dead_id = identifier(target, "dead letter id")
    replayed = await deadletters.replay(
        caller.state.client, dead_id, actor=caller.name, reason=reason
    )
    done = "replayed as" if replayed.created else "was already replayed as"
    return Done(f"dead letter {dead_id} {done} job {replayed.job_id}", f"/jobs/{replayed.job_id}")


FORCE = Option(
    "force",
    "Abandon pending cleanups",
    "A dead letter whose cleanup (compensation) is still pending is refused unless this is "
    "ticked; ticked, its cleanup is abandoned and the audit record says so.",
)


def _discard_verdict(caller: Caller, dead: DeadLetter) -> str:
    line = (
        f"Remove dead letter {dead.id} ({_object(dead)}, job {dead.job_id}); the "
        "audit record keeps it in full."
    )
    if dead.cleanup_state is CleanupState.PENDING:
        line += (
            f" Its cleanup is still pending ({dead.cleanup_attempts} attempts so far): "
            "refused unless 'Abandon pending cleanups' is ticked."
        )
    return line


async def _discard(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> str:
    dead_id = identifier(target, "dead letter id")
    force = params.get("force") == "on"
    removed = await deadletters.discard(
        caller.state.client.pool, dead_id, actor=caller.name, reason=reason, force=force
    )
    abandoned = (
        " (its pending cleanup abandoned)" if removed.cleanup_state is CleanupState.PENDING else ""
    )
    return f"dead letter {dead_id} discarded{abandoned}"


def _job_back(targets: Sequence[str]) -> str:
    return f"/jobs/{targets[0]}" if len(targets) == 1 else "/jobs"


def _dead_back(targets: Sequence[str]) -> str:
    return f"/dead-letters/{targets[0]}" if len(targets) == 1 else "/dead-letters"


ACTIONS = (
    Action(
        "job.cancel",
        "Cancel",
        "operate",
        per_target("Cancel {}", "job", _job, _cancel_verdict),
        _cancel,
        back=_job_back,
    ),
    Action(
        "job.retry_now",
        "Retry now",
        "operate",
        per_target("Retry {} now", "job", _job, _retry_verdict),
        _retry,
        back=_job_back,
    ),
    Action(
        "dead_letter.replay",
        "Replay",
        "operate",
        per_target("Replay {}", "dead letter", _dead, _replay_verdict),
        _replay,
        back=_dead_back,
    ),
    Action(
        "dead_letter.discard",
        "Discard",
        "operate",
        per_target("Discard {}", "dead letter", _dead, _discard_verdict, options=[FORCE]),
        _discard,
        back=_dead_back,
    ),
)
