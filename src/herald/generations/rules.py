"""The coordinator's rules, as pure functions (the database part is in coordinator.py).

For one (dataset, partition), a candidate built from ``inputs`` and planned against
generation ``base`` meets the partition at generation ``current`` (whose publication
used ``current_inputs``), while ``known`` manifests have been accepted for it.

1. Base current, no accepted input missing: publish as ``current + 1``.
2. Base current but an accepted manifest is missing (a late file): the candidate would
   silently omit input. The run's policy decides: wait, rebase (a new run with the
   missing input), or discard.
3. Base superseded and every input already in the current generation: nothing to add;
   discarded as superseded, whatever the policy (waiting could never help).
4. Base superseded, policy ``rebase``, inputs a superset of the current generation's and
   none missing: publish as the next generation (rebased).
5. Otherwise base superseded: wait, rebase or discard by policy.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("wait", "rebase", "discard")


@dataclass(frozen=True)
class Verdict:
    decision: str  # publish | wait | rebase | discard
    reason_code: str
    reason: str


def _ids(ids: frozenset[int]) -> str:
    return ", ".join(str(i) for i in sorted(ids)) or "none"


def decide(
    *,
    base: int,
    current: int,
    inputs: frozenset[int],
    current_inputs: frozenset[int],
    known: frozenset[int],
    policy: str,
) -> Verdict:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}")
    missing = known - inputs
    if base == current:
        if not missing:
            return Verdict(
                "publish",
                "base_current",
                f"planned against generation {base}, still current; inputs cover every "
                f"accepted manifest ({_ids(known)})",
            )
        return _by_policy(
            policy,
            "missing_input",
            f"accepted manifests {_ids(missing)} arrived after this run was planned and "
            "are not among its inputs",
        )
    if inputs <= current_inputs:
        return Verdict(
            "discard",
            "superseded",
            f"planned against generation {base}, but generation {current} is current and "
            f"already includes every input of this run ({_ids(inputs)})",
        )
    if policy == "rebase" and inputs >= current_inputs and not missing:
        return Verdict(
            "publish",
            "rebased",
            f"planned against generation {base}; generation {current} is current and this "
            f"run's inputs are a superset of its inputs ({_ids(current_inputs)}), so it "
            "rebases onto it",
        )
    return _by_policy(
        policy,
        "base_superseded",
        f"planned against generation {base}, but generation {current} is current and its "
        f"inputs ({_ids(current_inputs)}) are not all among this run's ({_ids(inputs)})",
    )


def _by_policy(policy: str, code: str, why: str) -> Verdict:
    if policy == "wait":
        return Verdict("wait", code, why + "; the run's policy is to wait")
    if policy == "rebase":
        return Verdict("rebase", code, why + "; the run's policy is to rebase onto them")
    return Verdict("discard", code, why + "; the run's policy is to discard")


@dataclass(frozen=True)
class Expectations:
    """What a dataset declares every publication must satisfy."""

    schema_version: int
    fields: tuple[str, ...]
    min_rows: int
    max_rows: int | None
    not_null: tuple[str, ...] = ()
    unique: tuple[str, ...] = ()


def check_rows(expect: Expectations, rows: list[dict[str, object]]) -> dict[str, object]:
    """Quality results of an output: each rule with passed and a detail."""
    results: dict[str, object] = {}
    count = len(rows)
    within = count >= expect.min_rows and (expect.max_rows is None or count <= expect.max_rows)
    results["row_count"] = {
        "passed": within,
        "detail": f"{count} rows, declared bounds [{expect.min_rows}, "
        f"{'unbounded' if expect.max_rows is None else expect.max_rows}]",
    }
    extra = sorted({k for row in rows for k in row} - set(expect.fields))
    missing = sorted({f for row in rows for f in expect.fields if f not in row})
    results["schema"] = {
        "passed": not extra and not missing,
        "detail": f"unexpected fields {extra}, missing fields {missing}"
        if extra or missing
        else f"fields match schema version {expect.schema_version}",
    }
    for field in expect.not_null:
        nulls = sum(1 for row in rows if row.get(field) is None)
        results[f"not_null:{field}"] = {"passed": nulls == 0, "detail": f"{nulls} null values"}
    for field in expect.unique:
        values = [row.get(field) for row in rows]
        dupes = len(values) - len({repr(v) for v in values})
        results[f"unique:{field}"] = {"passed": dupes == 0, "detail": f"{dupes} duplicates"}
    return results


def failed_checks(quality: dict[str, object]) -> list[str]:
    return sorted(
        name
        for name, result in quality.items()
        if isinstance(result, dict) and not result.get("passed", False)
    )
