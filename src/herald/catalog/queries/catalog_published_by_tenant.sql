-- Every tenant's datasets with a published version (the combined catalog): run for the
-- platform.
SELECT DISTINCT tenant_id, dataset_id
FROM dataset_versions
WHERE state = 'published'
ORDER BY tenant_id, dataset_id
