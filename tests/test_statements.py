"""Named statements: each is used, each lives in the folder of the layer that owns it."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from herald import sql
from tests.test_layers import SRC, layer_of

SQL_ROOT = SRC / "herald"


def _users() -> dict[str, set[str]]:
    """Statement name -> the runtime modules naming it (as a string literal)."""
    names = sql.names()
    found: dict[str, set[str]] = defaultdict(set)
    literal = re.compile(r"[\"']([a-z0-9_]+)[\"']")
    for path in SQL_ROOT.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        for name in set(literal.findall(path.read_text(encoding="utf-8"))) & set(names):
            found[name].add(module)
    return found


def _owner_module(package: str) -> str:
    return "herald.sql" if package == "sql" else f"herald.{package}"


def test_every_statement_file_is_used_by_the_product() -> None:
    users = _users()
    assert [name for name in sql.names() if not users.get(name)] == []


def test_a_statement_is_used_only_by_its_own_layer_and_the_layers_above() -> None:
    users = _users()
    below = {
        name: sorted(m for m in users[name] if layer_of(m) < layer_of(_owner_module(owner)))
        for name in sql.names()
        if (owner := sql.owner(name))
    }
    assert {name: modules for name, modules in below.items() if modules} == {}


def test_a_packages_statements_carry_its_prefix_and_the_core_has_none_of_theirs() -> None:
    prefixes = {"schedules": "schedule_"}
    wrong = []
    for name in sql.names():
        owner = sql.owner(name)
        if owner == "sql":
            if any(name.startswith(p) for p in ("ops_", "catalog_", "api_", "console_")):
                wrong.append(f"{name} is in the core")
        elif not name.startswith(prefixes.get(owner, f"{owner}_")):
            wrong.append(f"{name} is in {owner}")
    assert wrong == []


def test_each_package_folder_is_found_and_a_name_is_unique() -> None:
    folders = {p.parent.parent.name for p in SQL_ROOT.glob("*/queries/*.sql")}
    assert {"sql", "ops", "schedules", "catalog", "api", "console"} <= folders
    assert {sql.owner(n) for n in sql.names()} == folders
    files = [p.stem for p in SQL_ROOT.glob("*/queries/*.sql")]
    assert sorted(files) == sql.names()  # no duplicates, nothing missed
    with pytest.raises(sql.UnknownQuery):
        sql.owner("no_such_statement")


def test_the_users_of_a_statement_are_found() -> None:
    users = _users()
    assert "herald.worker" in users["claim"]
    assert users["ops_rate_acquire"] == {"herald.ops.limits"}
    assert Path(SQL_ROOT / "ops" / "queries" / "ops_rate_acquire.sql").exists()
