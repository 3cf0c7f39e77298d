-- Recover jobs whose lease expired: back to waiting, or dead (with its dead letter)
-- once the attempts are spent. Safe to run on every node at once (SKIP LOCKED).
-- run_at is left as it was (already due): an orphaned job keeps its place in the queue
-- instead of going behind a backlog that arrived while its worker was dead.
WITH expired AS (
    SELECT id, lease_owner, fence FROM jobs
    WHERE state = 'running' AND lease_expires_at < herald_now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE jobs j
    SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'waiting' END::job_state,
        lease_owner = NULL,
        lease_expires_at = NULL,
        rescues = j.rescues + 1,
        errors = herald_append_error(j.errors, jsonb_build_object(
                     'at', herald_now(), 'attempt', j.attempt, 'kind', 'lease_expired',
                     'message', 'lease expired: worker ' || e.lease_owner
                                || ' stopped renewing it')),
        finished_at = CASE WHEN j.attempt >= j.max_attempts THEN herald_now() END
    FROM expired e
    WHERE j.id = e.id
    RETURNING j.id, j.state, j.kind, j.queue, j.key, j.version, j.payload, j.attempt, j.step,
              j.checkpoint, j.errors, e.lease_owner AS old_owner, e.fence AS old_fence
), counted AS (
    INSERT INTO rescues (job_id, fence, owner, outcome)
    SELECT id, old_fence, old_owner, state FROM rescued
), dead AS (
    INSERT INTO dead_letters (job_id, kind, queue, key, version, payload, attempt, step,
                              cleanup, errors, reason)
    SELECT id, kind, queue, key, version, payload, attempt, step, checkpoint, errors,
           'lease_exhausted'
    FROM rescued WHERE state = 'dead'
)
SELECT id, state, kind FROM rescued
