"""The event loop Herald's processes run on, chosen by HERALD_EVENT_LOOP."""

from __future__ import annotations

import asyncio

import pytest

from herald import loop
from herald.cli import main
from herald.config import ConfigError


async def _loop_class_name() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_runs_on_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv("HERALD_EVENT_LOOP", raising=False)
    assert loop.run(_loop_class_name()).startswith("uvloop")


def test_asyncio_opts_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_EVENT_LOOP", "asyncio")
    assert loop.run(_loop_class_name()).startswith("asyncio")


def test_a_bad_choice_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HERALD_EVENT_LOOP", "trio")
    with pytest.raises(ConfigError, match="auto, uvloop or asyncio"):
        loop.loop_factory()
    assert main(["migrate"]) == 2
    assert "HERALD_EVENT_LOOP" in capsys.readouterr().err
