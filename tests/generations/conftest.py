"""The sample generations application bound to the test's schema and a store in tmp."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from herald.api.app import create_app
from herald.api.auth import create_key
from herald.api.state import ApiSettings
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from herald.generations import sample
from herald.generations.runtime import Generations
from herald.generations.store import ROOT_VARIABLE
from herald.ops.crypto import KEYS_VARIABLE, TokenCipher
from tests.generations.helpers import setup


@pytest.fixture
def gens(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Generations:
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "store"))
    monkeypatch.setenv(KEYS_VARIABLE, TokenCipher.generate_key())  # webhook secrets sealed
    sample.gens.use(settings)
    return sample.gens


@pytest.fixture
async def conn(settings: Settings, gens: Generations) -> AsyncIterator[AsyncConn]:
    assert settings.database_url is not None
    c = await connect(conninfo(settings.database_url, settings.schema))
    async with c:
        await setup(gens, c)
        yield c


@dataclass
class Api:
    http: httpx.AsyncClient
    tokens: dict[str, str]

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture
async def api(gens: Generations, conn: AsyncConn, settings: Settings) -> AsyncIterator[Api]:
    app = create_app(gens.app, settings, ApiSettings())
    tokens = {}
    for name, scopes in (
        ("reader", ["read"]),
        ("oncall", ["operate", "read", "submit"]),
        ("lead", ["admin"]),
    ):
        tokens[name] = (await create_key(conn, name, scopes)).token
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        yield Api(http, tokens)
