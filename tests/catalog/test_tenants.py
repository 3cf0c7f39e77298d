"""A tenant's publication: its files under its own folder, its entry in its own catalog
graph, its SPARQL restricted to its graphs (the default tenant's layout is unchanged)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from rdflib import Graph, URIRef

from herald import tenancy
from herald.api import ApiSettings, create_app, create_key
from herald.catalog.metadata import DCAT
from herald.catalog.pipeline import (
    catalog_graphs,
    request_publication,
)
from herald.catalog.publishing import CatalogSettings
from herald.client import open_connection
from herald.config import ConfigError, Settings
from tests.catalog.test_pipeline import (
    CATALOG,
    DATASET_ID,
    Catalog,
    catalog,
    dataset,
    open_catalog,
)
from tests.tenancy_kit import make_tenants

__all__ = ["catalog"]  # the fixture, used by name


async def test_a_tenants_publication_stays_in_its_folder_and_catalog(catalog: Catalog) -> None:
    await make_tenants(catalog.client.pool, "acme")
    with tenancy.acting_as("acme"):
        await catalog.register(dataset())
        job = await request_publication(catalog.client, DATASET_ID)
        assert (await catalog.run_until_finished(job.id))["state"] == "succeeded"
        version = await catalog.version(1)
        async with catalog.client.pool.connection() as conn:
            mine = await catalog_graphs(conn, CATALOG.urls)
    assert all(f.store_key.startswith(f"tenants/acme/{DATASET_ID}/v1/") for f in version.files)
    assert catalog.files.list(f"tenants/acme/{DATASET_ID}/v1")
    assert mine == [
        "https://data.example.org/v1/catalog/tenants/acme",
        CATALOG.urls.entry_graph(DATASET_ID),
    ]
    # the default tenant sees neither the dataset nor its entry, and its catalog is empty
    async with catalog.client.pool.connection() as conn:
        theirs = await catalog_graphs(conn, CATALOG.urls)
    assert theirs == ["https://data.example.org/v1/catalog"]
    acme_catalog = "https://data.example.org/v1/catalog/tenants/acme"
    described = catalog.store.select(
        f"SELECT ?c WHERE {{ GRAPH <{acme_catalog}> "
        "{ ?c a <http://www.w3.org/ns/dcat#Catalog> } }"
    )
    assert [r["c"] for r in described] == [f"{acme_catalog}#catalog"]
    linked = catalog.store.select(
        f"SELECT ?d WHERE {{ GRAPH <{CATALOG.urls.entry_graph(DATASET_ID)}> "
        f"{{ <{acme_catalog}#catalog> <http://www.w3.org/ns/dcat#dataset> ?d }} }}"
    )
    assert len(linked) == 1  # the entry names its tenant's catalog
    nothing = catalog.store.select(
        "SELECT ?s WHERE { GRAPH <https://data.example.org/v1/catalog> { ?s ?p ?o } }"
    )
    assert nothing == []  # the default tenant published nothing


@pytest.fixture
async def combined(settings: Settings, tmp_path: Path) -> AsyncIterator[Catalog]:
    """A catalog serving the combined catalog (``HERALD_CATALOG_COMBINED``)."""
    async with open_catalog(
        settings, tmp_path, dataclasses.replace(CATALOG, combined=True)
    ) as found:
        yield found


@asynccontextmanager
async def _api(
    found: Catalog, tenant: str
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, Any]]]:
    """The HTTP API of ``found``'s application and a read key of ``tenant``."""
    app = create_app(found.app, found.settings, ApiSettings())
    with tenancy.acting_as(tenant):
        async with await open_connection(found.settings) as conn:
            await tenancy.tell(conn)
            token = (await create_key(conn, f"reader-{tenant}", ["read"])).token
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://herald.test") as http,
    ):
        yield http, {"Authorization": f"Bearer {token}", "Accept": "text/turtle"}


async def _publish(found: Catalog, tenant: str, dataset_id: str) -> None:
    with tenancy.acting_as(tenant):
        await found.register(dataset(count=20, id=dataset_id, title=f"Data of {tenant}"))
        job = await request_publication(found.client, dataset_id)
        assert (await found.run_until_finished(job.id))["state"] == "succeeded"


async def test_the_combined_catalog_lists_every_tenants_datasets_under_its_own_catalog(
    combined: Catalog,
) -> None:
    await make_tenants(combined.client.pool, "acme", "globex")
    await _publish(combined, "acme", "acme-data")
    await _publish(combined, "globex", "globex-data")
    root = "https://data.example.org/v1"
    async with _api(combined, "acme") as (http, headers):
        r = await http.get("/v1/catalog/combined", headers=headers)
        assert r.status_code == 200, r.text
        graph = Graph().parse(data=r.text, format="turtle")
        own = await http.get("/v1/catalog", headers=headers)
    whole = URIRef(f"{root}/catalog/combined#catalog")
    assert set(graph.objects(whole, DCAT.catalog)) == {
        URIRef(f"{root}/catalog/tenants/acme#catalog"),
        URIRef(f"{root}/catalog/tenants/globex#catalog"),
    }
    for tenant in ("acme", "globex"):
        listed = set(
            graph.objects(URIRef(f"{root}/catalog/tenants/{tenant}#catalog"), DCAT.dataset)
        )
        assert listed == {URIRef(f"{root}/datasets/{tenant}-data#dataset")}, tenant
    # a tenant's own catalog is still its own
    assert "acme-data" in own.text and "globex-data" not in own.text


async def test_without_the_setting_there_is_no_combined_catalog(catalog: Catalog) -> None:
    await make_tenants(catalog.client.pool, "acme")
    async with _api(catalog, "acme") as (http, headers):
        r = await http.get("/v1/catalog/combined", headers=headers)
    assert r.status_code == 404 and "HERALD_CATALOG_COMBINED" in r.text
    assert CatalogSettings.from_env({"HERALD_CATALOG_COMBINED": "1"}).combined
    assert not CatalogSettings.from_env({}).combined
    with pytest.raises(ConfigError):
        CatalogSettings.from_env({"HERALD_CATALOG_COMBINED": "maybe"})
