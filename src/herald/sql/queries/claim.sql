-- Claim a batch: owner, lease, attempt and fence move in one atomic update.
WITH next AS (
    SELECT id FROM jobs
    WHERE state = 'waiting' AND queue = ANY(%(queues)s::text[]) AND run_at <= herald_now()
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET state = 'running',
    attempt = j.attempt + 1,
    fence = j.fence + 1,
    lease_owner = %(owner)s,
    lease_expires_at = herald_now() + make_interval(secs => %(lease_s)s),
    attempted_at = herald_now()
FROM next
WHERE j.id = next.id
RETURNING j.id, j.kind, j.queue, j.key, j.version, j.payload, j.priority, j.attempt,
          j.max_attempts, j.fence, j.step, j.checkpoint
