-- Take the dataset's next version number and record the publication as requested, in
-- one statement: if another publication is active the unique index refuses the insert
-- and the number is not consumed.
WITH numbered AS (
    UPDATE datasets SET next_version = next_version + 1, updated_at = herald_now()
    WHERE id = %(dataset_id)s
    RETURNING id, next_version - 1 AS version
)
INSERT INTO dataset_versions (dataset_id, version, job_id)
SELECT id, version, %(job_id)s FROM numbered
RETURNING *
