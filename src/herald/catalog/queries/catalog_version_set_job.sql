UPDATE dataset_versions SET job_id = %(job_id)s, updated_at = herald_now()
WHERE dataset_id = %(dataset_id)s AND version = %(version)s
RETURNING *
