-- Recover jobs whose lease expired: back to waiting, or dead (with its dead letter)
-- once the attempts are spent. Safe to run on every node at once (SKIP LOCKED).
-- Poison isolation: the expiry is charged (the attempt stays spent) only when the job
-- was a suspect (strikes = 2), which its worker held as its only suspect; otherwise the
-- attempt is given back and the job takes a strike (two make a suspect).
-- run_at is left as it was (already due): an orphaned job keeps its place in the queue
-- instead of going behind a backlog that arrived while its worker was dead. Not so a
-- charged suspect: like a failed attempt it goes to the back, or a poison job at the
-- head of the line would be every fresh worker's first suspect (and kill it) until its
-- attempts ran out, while the suspects behind it waited.
WITH expired AS (
    SELECT id, lease_owner, fence, strikes = 2 AS suspect FROM jobs
    WHERE state = 'running' AND lease_expires_at < herald_now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE jobs j
    SET state = CASE WHEN e.suspect AND j.attempt >= j.max_attempts THEN 'dead'
                     ELSE 'waiting' END::job_state,
        attempt = CASE WHEN e.suspect THEN j.attempt ELSE j.attempt - 1 END,
        strikes = CASE WHEN e.suspect AND j.attempt >= j.max_attempts THEN 0
                       ELSE least(j.strikes + 1, 2) END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        run_at = CASE WHEN e.suspect THEN herald_now() ELSE j.run_at END,
        rescues = j.rescues + 1,
        errors = herald_append_error(j.errors, jsonb_build_object(
                     'at', herald_now(), 'attempt', j.attempt, 'kind', 'lease_expired',
                     'charged', e.suspect,
                     'message', 'lease expired: worker ' || e.lease_owner
                                || ' stopped renewing it')),
        finished_at = CASE WHEN e.suspect AND j.attempt >= j.max_attempts THEN herald_now() END
    FROM expired e
    WHERE j.id = e.id
    RETURNING j.id, j.tenant_id, j.state, j.kind, e.lease_owner AS old_owner,
              e.fence AS old_fence, e.suspect AS charged,
              CASE WHEN j.state = 'dead' THEN j END AS dead_job
), counted AS (
    INSERT INTO rescues (tenant_id, job_id, fence, owner, outcome, charged)
    SELECT tenant_id, id, old_fence, old_owner, state, charged FROM rescued
), dead AS (
    SELECT count(herald_dead_letter(dead_job, 'lease_exhausted')) AS written
    FROM rescued WHERE state = 'dead'
)
-- `dead` is read by a condition on no row (evaluated once, before any row is read): a
-- CTE that only reads runs when, and as far as, it is read.
SELECT id, state, kind, charged FROM rescued WHERE (SELECT written FROM dead) >= 0
