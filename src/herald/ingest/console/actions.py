"""Ingestion's manual action in the console: fetch a provider's snapshot now.

The review says what the fetch will do (or that one is under way already); the perform
calls :func:`herald.ingest.providers.request_fetch`, which admits the fetch job and
writes the audit record in one transaction, with the signed-in key and its reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from herald.client import Outcome
from herald.console import Action, Caller, Done
from herald.console.registry import Skip, per_target
from herald.errors import UnknownKind
from herald.ingest.providers import FETCH, Provider, get_provider, request_fetch
from herald.ops.audit import Note


def runs_ingest(caller: Caller) -> bool:
    """Whether this deployment runs ingestion's jobs (else nothing would fetch)."""
    try:
        caller.state.app.kind(FETCH)
    except UnknownKind:
        return False
    return True


async def _provider(caller: Caller, target: str) -> Provider | None:
    if not 0 < len(target) <= 128:
        return None
    async with caller.state.client.pool.connection() as conn:
        return await get_provider(conn, target)


def _fetch_verdict(caller: Caller, row: Provider) -> str | Skip:
    if not runs_ingest(caller):
        return Skip(f"provider {row.name}: this deployment does not run ingestion's jobs")
    return (
        f"Fetch the snapshot of provider {row.name} now ({row.format} from "
        f"{row.url}): a new ingestion run stages its records, then processing updates "
        "the canonical plans; malformed records are quarantined. If a fetch of this "
        "provider is waiting or running already, that one is kept and nothing new starts."
    )


async def _fetch(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
    if not runs_ingest(caller):
        raise ValueError("this deployment does not run ingestion's jobs")
    admitted = await request_fetch(caller.state.client, target, note=Note(caller.name, reason))
    if admitted.outcome is Outcome.CREATED:
        return Done(
            f"provider {target}: fetch requested (job {admitted.id})", f"/jobs/{admitted.id}"
        )
    return Done(
        f"provider {target}: a fetch is under way already (job {admitted.id}); nothing new",
        f"/jobs/{admitted.id}",
    )


def _back(targets: Sequence[str]) -> str:
    return f"/ingestion/providers/{targets[0]}" if len(targets) == 1 else "/ingestion"


ACTIONS = (
    Action(
        "ingest_provider.fetch",
        "Fetch now",
        "operate",
        per_target("Fetch {} now", "provider", _provider, _fetch_verdict),
        _fetch,
        back=_back,
    ),
)
