"""The catalog's manual actions in the operator console: publish a new version of a
dataset, delete a version (its files and catalog entry).

Each review says, per target, what the action will do or why it will not; each perform
calls the catalog's own admission (:mod:`herald.catalog.admission`), which checks the
dataset and version, admits the job and writes the audit record in one transaction, with
the signed-in key as the actor and the operator's reason. Both need ``operate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from herald.catalog.admission import DELETE_VERSION, PUBLISH, request_deletion, request_publication
from herald.catalog.datasets import Dataset, VersionRecord, get_dataset, get_version, list_versions
from herald.client import Outcome
from herald.console import Action, Caller, Done, Missing
from herald.console.registry import Review, Skip
from herald.console.render import size
from herald.console.web import Invalid
from herald.errors import UnknownKind
from herald.ops.audit import Note

_SEGMENT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def dataset_id(value: str) -> str:
    """A dataset id as the catalog allows them; anything else names no dataset."""
    if not 0 < len(value) <= 128 or not set(value) <= _SEGMENT or ".." in value:
        raise Missing(f"no dataset {value[:130]!r} is registered")
    return value


def version_target(value: str) -> tuple[str, int]:
    """``<dataset id>/<version>``, the target of a version's action."""
    name, _, number = value.rpartition("/")
    if not name or not number.isdigit() or not 1 <= int(number) <= 2**31 - 1:
        raise Invalid(f"a version is named <dataset>/<number>, got {value[:140]!r}")
    return dataset_id(name), int(number)


def runs_catalog(caller: Caller, kind: str) -> bool:
    try:
        caller.state.app.kind(kind)
    except UnknownKind:
        return False
    return True


# --- publish --------------------------------------------------------------------------------


def _publish_verdict(
    caller: Caller, found: Dataset | None, versions: Sequence[VersionRecord], target: str
) -> str | Skip:
    if found is None:
        return Skip(f"no dataset {target!r} is registered")
    if not runs_catalog(caller, PUBLISH):
        return Skip(f"dataset {target}: this deployment does not run the catalog's jobs")
    active = next((v for v in versions if v.active and v.status != "failed"), None)
    if active is not None:
        return Skip(
            f"dataset {target}: version {active.version} is being published now "
            f"({active.status}, job {active.job_id}); nothing new would start"
        )
    published = [v.version for v in versions if v.state == "published"]
    shown = f"version {max(published)}" if published else "no version yet"
    return (
        f"Publish a new version of dataset {target} ({found.info.title}): read its source "
        f"({found.source.get('type', '?')}), export the files, validate the entry against "
        f"the {found.tier} tier and, if it conforms, make it the catalog's entry (today "
        f"{shown}). It runs as a catalog.publish job; a failed attempt removes its files."
    )


async def _review_publish(
    caller: Caller, targets: Sequence[str], params: Mapping[str, str]
) -> Review:
    effects: list[str] = []
    refusals: list[str] = []
    async with caller.state.client.pool.connection() as conn:
        for target in targets:
            found = await get_dataset(conn, dataset_id(target))
            versions = await list_versions(conn, target) if found is not None else []
            verdict = _publish_verdict(caller, found, versions, target)
            if isinstance(verdict, Skip):
                refusals.append(verdict.why)
            else:
                effects.append(verdict)
    noun = f"dataset {targets[0]}" if len(targets) == 1 else f"{len(targets)} datasets"
    return Review(f"Publish {noun}", effects, refusals)


async def _publish(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
    chosen = dataset_id(target)
    if not runs_catalog(caller, PUBLISH):
        raise ValueError("this deployment does not run the catalog's jobs")
    admitted = await request_publication(
        caller.state.client, chosen, note=Note(caller.name, reason)
    )
    if admitted.outcome is not Outcome.CREATED:
        return Done(
            f"dataset {chosen}: version {admitted.version} was already being published "
            f"(job {admitted.id}); nothing new started",
            f"/datasets/{chosen}/versions/{admitted.version}",
        )
    return Done(
        f"dataset {chosen}: version {admitted.version} requested (job {admitted.id})",
        f"/datasets/{chosen}/versions/{admitted.version}",
    )


# --- delete a version -------------------------------------------------------------------------


def _delete_verdict(
    caller: Caller, found: Dataset | None, record: VersionRecord | None, target: str
) -> str | Skip:
    if found is None or record is None:
        return Skip(f"{target}: there is no such version")
    if not runs_catalog(caller, DELETE_VERSION):
        return Skip(f"{target}: this deployment does not run the catalog's jobs")
    if record.status != record.state or record.state not in ("published", "failed"):
        return Skip(
            f"{target} is {record.status}: only a published or failed version can be "
            "deleted (a failed publication is deletable once its cleanup has run)"
        )
    files = len(record.files)
    total = size(sum(f.byte_size for f in record.files))
    line = (
        f"Delete version {record.version} of dataset {found.id}: remove its {files} "
        f"file{'s' if files != 1 else ''} ({total}) from the export store"
    )
    if record.status == "published":
        line += (
            "; if it is the catalog's entry now, the entry goes back to the latest other "
            "published version (or is removed when there is none)"
        )
    return line + ". It runs as a catalog.delete_version job; the version row stays, deleted."


async def _review_delete(
    caller: Caller, targets: Sequence[str], params: Mapping[str, str]
) -> Review:
    effects: list[str] = []
    refusals: list[str] = []
    async with caller.state.client.pool.connection() as conn:
        for target in targets:
            name, number = version_target(target)
            found = await get_dataset(conn, name)
            record = await get_version(conn, name, number) if found is not None else None
            verdict = _delete_verdict(caller, found, record, target)
            if isinstance(verdict, Skip):
                refusals.append(verdict.why)
            else:
                effects.append(verdict)
    noun = f"version {targets[0]}" if len(targets) == 1 else f"{len(targets)} versions"
    return Review(f"Delete {noun}", effects, refusals)


async def _delete(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
    name, number = version_target(target)
    async with caller.state.client.pool.connection() as conn:
        record = await get_version(conn, name, number)
    if record is None:
        raise Missing(f"{target}: there is no such version")
    if record.status != record.state or record.state not in ("published", "failed"):
        raise ValueError(f"{target} is {record.status}: only a published or failed version")
    admitted = await request_deletion(
        caller.state.client, name, number, note=Note(caller.name, reason)
    )
    said = "deletion requested" if admitted.outcome is Outcome.CREATED else "already being deleted"
    return Done(f"{target}: {said} (job {admitted.id})", f"/datasets/{name}/versions/{number}")


def _dataset_back(targets: Sequence[str]) -> str:
    return f"/datasets/{targets[0]}" if len(targets) == 1 else "/datasets"


def _version_back(targets: Sequence[str]) -> str:
    if len(targets) == 1:
        try:
            name, number = version_target(targets[0])
        except (Invalid, Missing):
            return "/datasets"
        return f"/datasets/{name}/versions/{number}"
    return "/datasets"


ACTIONS = (
    Action("dataset.publish", "Publish", "operate", _review_publish, _publish, _dataset_back),
    Action("dataset_version.delete", "Delete", "operate", _review_delete, _delete, _version_back),
)
