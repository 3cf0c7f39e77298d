"""The coordinator's rules as a table (pure functions, no database)."""

from __future__ import annotations

import pytest

from herald.generations.rules import Expectations, check_rows, decide, failed_checks

A, B, C = 1, 2, 3


@pytest.mark.parametrize(
    ("base", "current", "inputs", "current_inputs", "known", "policy", "decision", "code"),
    [
        # base current, nothing missing: publish
        (41, 41, {A}, {A}, {A}, "wait", "publish", "base_current"),
        # the repair: base current, inputs include the late file
        (41, 41, {A, B}, {A}, {A, B}, "rebase", "publish", "base_current"),
        # the daily run beside a late file: never silently omit input
        (41, 41, {A}, {A}, {A, B}, "wait", "wait", "missing_input"),
        (41, 41, {A}, {A}, {A, B}, "rebase", "rebase", "missing_input"),
        (41, 41, {A}, {A}, {A, B}, "discard", "discard", "missing_input"),
        # the daily run after the repair published: superseded whatever its policy
        (41, 42, {A}, {A, B}, {A, B}, "wait", "discard", "superseded"),
        (41, 42, {A}, {A, B}, {A, B}, "rebase", "discard", "superseded"),
        # base superseded, a superset of the current inputs, policy rebase: publish
        (41, 42, {A, B, C}, {A, B}, {A, B, C}, "rebase", "publish", "rebased"),
        # base superseded, inputs neither subset nor superset: by policy
        (41, 42, {A, C}, {A, B}, {A, B, C}, "wait", "wait", "base_superseded"),
        (41, 42, {A, C}, {A, B}, {A, B, C}, "rebase", "rebase", "base_superseded"),
        (41, 42, {A, C}, {A, B}, {A, B, C}, "discard", "discard", "base_superseded"),
        # superset but still missing an accepted input: not published
        (41, 42, {A, B}, {A}, {A, B, C}, "rebase", "rebase", "base_superseded"),
    ],
)
def test_decide(
    base: int,
    current: int,
    inputs: set[int],
    current_inputs: set[int],
    known: set[int],
    policy: str,
    decision: str,
    code: str,
) -> None:
    verdict = decide(
        base=base,
        current=current,
        inputs=frozenset(inputs),
        current_inputs=frozenset(current_inputs),
        known=frozenset(known),
        policy=policy,
    )
    assert (verdict.decision, verdict.reason_code) == (decision, code)
    assert verdict.reason


def test_quality_checks_name_what_failed() -> None:
    expect = Expectations(1, ("id", "n"), min_rows=1, max_rows=2, not_null=("n",), unique=("id",))
    rows: list[dict[str, object]] = [
        {"id": 1, "n": None},
        {"id": 1, "n": 2},
        {"id": 2, "n": 3, "x": 0},
    ]
    assert failed_checks(check_rows(expect, rows)) == [
        "not_null:n",
        "row_count",
        "schema",
        "unique:id",
    ]
    assert failed_checks(check_rows(expect, [{"id": 1, "n": 1}])) == []
