-- A claimed row could not be processed: back to pending while attempts remain, else
-- failed for good; the error stays visible either way.
UPDATE ingest_staged
SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
    claimed_at = NULL, last_error = left(%(error)s, 2000)
WHERE id = ANY(%(ids)s::bigint[]) AND state = 'processing' AND claimed_by = %(token)s
RETURNING id, state
