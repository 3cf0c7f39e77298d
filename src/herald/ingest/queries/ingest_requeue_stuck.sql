-- Rows stuck in processing longer than the bound (their worker crashed or hangs) go
-- back to pending, or fail when that claim was their last attempt.
UPDATE ingest_staged
SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
    claimed_at = NULL,
    last_error = 'requeued: in processing since ' || claimed_at::text || ' (claimed by ' || claimed_by || ')'
WHERE id IN (
    SELECT id FROM ingest_staged
    WHERE state = 'processing' AND claimed_at < herald_now() - make_interval(secs => %(after_s)s)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id, run_id, state
