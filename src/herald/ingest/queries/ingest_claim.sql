-- Claim rows locked by ingest_lock_batch for processing in later transactions (the
-- careful path, row by row): committed at once as processing under a claim token, so a
-- worker that dies leaves them visibly stuck for the requeue duty. A claim counts as an
-- attempt.
UPDATE ingest_staged s
SET state = 'processing', attempts = s.attempts + 1, claimed_at = herald_now(),
    claimed_by = %(token)s
WHERE s.id = ANY(%(ids)s::bigint[]) AND s.state = 'pending'
RETURNING s.id
