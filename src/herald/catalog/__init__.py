"""Publishing datasets to an open-data catalog: exports, DCAT-AP metadata, triple store."""
