-- Move a run's partition on; a settled partition is not moved again.
UPDATE gen_run_partitions
SET state = %(state)s, detail = coalesce(%(detail)s, detail),
    candidate_id = coalesce(%(candidate_id)s, candidate_id), updated_at = herald_now()
WHERE run_id = %(run_id)s AND partition = %(partition)s
  AND (state IN ('queued', 'building', 'waiting') OR state = %(state)s)
RETURNING *
