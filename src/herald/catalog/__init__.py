"""Publishing datasets to an open-data catalog.

- :mod:`~herald.catalog.sources`: records from PostgreSQL, CSV, JSON Lines or a generator.
- :mod:`~herald.catalog.export`: one streamed pass to JSON, XML and CSV files with SHA-256.
- :mod:`~herald.catalog.store`: where files live (atomic, immutable, idempotent delete).
- :mod:`~herald.catalog.metadata`: DCAT-AP 3.0 rendering; :mod:`~herald.catalog.validation`:
  SHACL tiers and readable reports.
- :mod:`~herald.catalog.triplestore`: embedded Oxigraph or a SPARQL endpoint, atomic entries.
- :mod:`~herald.catalog.datasets`: the registry and version records in PostgreSQL.
- :mod:`~herald.catalog.publishing`: the publication steps a pipeline chains.
"""
