-- The generation the coordinator published a version as (in its fenced completion).
UPDATE dataset_versions SET generation = %(generation)s, updated_at = herald_now()
WHERE dataset_id = %(dataset_id)s AND version = %(version)s
