"""A tenant's publication: its files under its own folder, its entry in its own catalog
graph, its SPARQL restricted to its graphs (the default tenant's layout is unchanged)."""

from __future__ import annotations

from herald import tenancy
from herald.catalog.pipeline import catalog_graphs, request_publication
from tests.catalog.test_pipeline import CATALOG, DATASET_ID, Catalog, catalog, dataset
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
