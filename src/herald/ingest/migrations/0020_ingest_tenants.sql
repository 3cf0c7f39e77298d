-- The ingestion's records belong to a tenant (see the core's 0016_tenants): providers,
-- runs, staged snapshots, plans and quarantine entries.
SELECT herald_isolate(t)
FROM unnest(ARRAY['ingest_providers', 'ingest_runs', 'ingest_staged', 'ingest_plans',
                  'ingest_quarantine']::regclass[]) AS t;
