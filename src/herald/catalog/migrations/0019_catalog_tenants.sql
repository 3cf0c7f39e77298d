-- The catalog's records belong to a tenant (see the core's 0016_tenants): datasets,
-- their versions and files. A dataset id stays one name across the deployment (its
-- files and graph are addressed by it): a tenant cannot take, see or overwrite an id
-- another tenant holds.
SELECT herald_isolate(t)
FROM unnest(ARRAY['datasets', 'dataset_versions', 'dataset_files']::regclass[]) AS t;
