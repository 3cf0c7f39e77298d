-- Claim a batch of a run's rows: only pending rows with attempts left, and only while
-- their run is staged (a fetching or failed run's rows are never claimable). Rows
-- another worker has locked are skipped, so workers get disjoint batches without a
-- central lock. A claim counts as an attempt (a worker killed mid-batch used one).
WITH run AS (
    SELECT id FROM ingest_runs WHERE id = %(run_id)s AND state = 'staged'
), picked AS (
    SELECT s.id
    FROM ingest_staged s JOIN run ON run.id = s.run_id
    WHERE s.state = 'pending' AND s.attempts < s.max_attempts
    ORDER BY s.id
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE ingest_staged s
SET state = 'processing', attempts = s.attempts + 1, claimed_at = herald_now(),
    claimed_by = %(token)s
FROM picked
WHERE s.id = picked.id
RETURNING s.id
