-- A dataset's entry was described again: keep its Turtle on the current version (what a
-- later restore puts back) and clear the mark.
WITH version AS (
    UPDATE dataset_versions SET metadata = %(metadata)s, updated_at = herald_now()
    WHERE dataset_id = %(dataset_id)s AND version = %(version)s AND state = 'published'
    RETURNING dataset_id
)
UPDATE datasets SET entry_outdated = false
WHERE id = %(dataset_id)s AND EXISTS (SELECT 1 FROM version)
RETURNING id
