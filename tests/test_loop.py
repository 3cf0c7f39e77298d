"""The event loop Herald's processes run on, chosen by HERALD_EVENT_LOOP."""

from __future__ import annotations

import asyncio

import pytest

from herald import loop
from herald.cli import main
from herald.config import ConfigError, Settings


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_runs_on_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")
    event_loop = Settings.from_env({}).event_loop
    assert event_loop == "auto"
    assert loop.run(_loop_module(), event_loop).startswith("uvloop")


def test_asyncio_opts_out() -> None:
    event_loop = Settings.from_env({"HERALD_EVENT_LOOP": " Asyncio "}).event_loop
    assert loop.run(_loop_module(), event_loop).startswith("asyncio")


def test_a_bad_choice_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="auto, uvloop, asyncio"):
        Settings.from_env({"HERALD_EVENT_LOOP": "trio"})
    monkeypatch.setenv("HERALD_EVENT_LOOP", "trio")
    assert main(["migrate"]) == 2
    assert "HERALD_EVENT_LOOP" in capsys.readouterr().err
