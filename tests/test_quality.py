"""The code stays ruff- and mypy --strict-clean: checked as part of the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=580
    )


@pytest.mark.timeout(600)
def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "src", "tests", "benchmarks", "faults")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)  # a cold mypy run over every dependency takes a while
def test_mypy_strict_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
