"""Fixtures for the social package: a real sandbox server on loopback and an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest

from herald.social.sandbox import Sandbox, SandboxConfig


@pytest.fixture
def sandbox_factory() -> Iterator[Callable[..., Sandbox]]:
    started: list[Sandbox] = []

    def start(config: SandboxConfig | None = None) -> Sandbox:
        sandbox = Sandbox(config).start()
        started.append(sandbox)
        return sandbox

    yield start
    for sandbox in started:
        sandbox.stop()


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., Sandbox]) -> Sandbox:
    return sandbox_factory()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client
