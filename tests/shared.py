"""The shared reference data beside the repository (official DCAT-AP shapes...).

It lives in ``<repository>/../shared``, or where ``HERALD_SHARED_DIR`` says (a worktree
elsewhere). A test that needs it fails in CI when it is missing, and elsewhere is
skipped with the place it looked in.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    configured = os.environ.get("HERALD_SHARED_DIR")
    return Path(configured) if configured else ROOT.parent / "shared"


def shared_path(*parts: str) -> Path:
    """``shared/<parts>``; fails in CI (``CI`` set) and skips elsewhere when missing."""
    path = shared_dir().joinpath(*parts)
    if not path.exists():
        message = (
            f"the shared reference data is missing: {path} (set HERALD_SHARED_DIR to the "
            "folder holding reference/)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
