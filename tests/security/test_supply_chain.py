"""Supply chain: CI installs tested versions, pinned for every declared dependency."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_dependency_is_pinned_and_ci_installs_the_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = [
        requirement
        for requirement in [
            *project["dependencies"],
            *(r for group, found in extras.items() if group != "peers" for r in found),
        ]
        if _name(requirement) != project["name"]  # herald[api]: an extra of its own
    ]
    # The test extra installs every other one: the suite covers the whole product.
    assert "herald[all]" in extras["test"]
    assert set(extras) - {"all", "test", "peers"} <= set(
        re.findall(r"[a-z]+", extras["all"][0].partition("[")[2])
    )
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt pins exact versions, not {line!r}"
            pins[_name(name)] = version
    missing = [r for r in declared if _name(r) not in pins]
    assert missing == [], f"not pinned in constraints.txt: {missing}"
    script = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest"
    assert command in readme and command in script
    assert script.index('export PIP_CONSTRAINT="$PWD/constraints.txt"') < script.index(command)
