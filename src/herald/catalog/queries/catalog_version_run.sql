-- The generations run of a version (NULL until its publication first starts).
SELECT run_id, generation FROM dataset_versions
WHERE dataset_id = %(dataset_id)s AND version = %(version)s
