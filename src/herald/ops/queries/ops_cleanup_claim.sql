-- Claim due cleanups of the kinds this runner can compensate. The claim pushes next_at
-- one lease ahead, so other runners leave the record alone meanwhile (a crashed runner's
-- claim simply expires), and bumps attempts, which fences the outcome written later.
WITH due AS (
    SELECT id FROM dead_letters
    WHERE cleanup_state = 'pending'
      AND cleanup_next_at <= herald_now()
      AND kind = ANY(%(kinds)s::text[])
    ORDER BY cleanup_next_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE dead_letters d
SET cleanup_attempts = d.cleanup_attempts + 1,
    cleanup_next_at = herald_now() + make_interval(secs => %(lease_s)s)
FROM due
WHERE d.id = due.id
RETURNING d.id, d.job_id, d.kind, d.queue, d.key, d.version, d.payload, d.attempt, d.step,
          d.cleanup, d.errors, d.reason, d.created_at, d.cleanup_attempts
