-- Name the run a version's publication declared (once: a retried attempt keeps it).
UPDATE dataset_versions SET run_id = %(run_id)s, updated_at = herald_now()
WHERE dataset_id = %(dataset_id)s AND version = %(version)s AND run_id IS NULL
