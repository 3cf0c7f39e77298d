-- The datasets with a published version: the entries the catalog shows.
SELECT DISTINCT dataset_id FROM dataset_versions WHERE state = 'published' ORDER BY dataset_id
