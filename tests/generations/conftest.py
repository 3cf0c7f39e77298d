"""The sample generations application bound to the test's schema and a store in tmp."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from herald.generations import sample
from herald.generations.runtime import Generations
from herald.generations.store import ROOT_VARIABLE
from tests.generations.helpers import setup


@pytest.fixture
def gens(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Generations:
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "store"))
    sample.gens.use(settings)
    return sample.gens


@pytest.fixture
async def conn(settings: Settings, gens: Generations) -> AsyncIterator[AsyncConn]:
    assert settings.database_url is not None
    c = await connect(conninfo(settings.database_url, settings.schema))
    async with c:
        await setup(gens, c)
        yield c
