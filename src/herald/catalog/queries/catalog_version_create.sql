-- Record a publication's version under the number its job was given (one numbering for
-- both): the dataset's counter moves past it. No row back when that version already
-- exists; the one-active index refuses it while another publication is active.
WITH numbered AS (
    UPDATE datasets
    SET next_version = greatest(next_version, %(version)s + 1), updated_at = herald_now()
    WHERE id = %(dataset_id)s
    RETURNING id
)
INSERT INTO dataset_versions (dataset_id, version, job_id)
SELECT id, %(version)s, %(job_id)s FROM numbered
ON CONFLICT (dataset_id, version) DO NOTHING
RETURNING *
