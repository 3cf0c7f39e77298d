-- Lock the next batch of a run's claimable rows in the caller's transaction: pending,
-- attempts left, id after the caller's key, and only while the run is staged (a
-- fetching or failed run's rows are never claimable). Rows another worker holds are
-- skipped, so workers get disjoint key ranges without a central lock; the caller keeps
-- its last key, so no claim rescans the rows already behind it.
SELECT s.id
FROM ingest_staged s
WHERE s.run_id = %(run_id)s AND s.state = 'pending' AND s.attempts < s.max_attempts
  AND s.id > %(after)s
  AND EXISTS (SELECT 1 FROM ingest_runs r WHERE r.id = %(run_id)s AND r.state = 'staged')
ORDER BY s.id
LIMIT %(limit)s
FOR UPDATE OF s SKIP LOCKED
