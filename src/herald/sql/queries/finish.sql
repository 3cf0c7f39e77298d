-- Record the outcomes of a batch of attempts, each fenced by (id, fence).
--   succeeded | cancelled   -> terminal
--   dead                    -> terminal, dead letter written in this statement
--   retry                   -> waiting after delay_s, or dead when attempts are spent
--   snooze                  -> waiting after delay_s; the attempt is given back
-- Writes whose fence is stale change nothing and are recorded in stale_writes.
WITH input AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(outcomes)s::text[],
                         %(delays)s::float8[], %(errors)s::jsonb[], %(results)s::jsonb[])
        AS t(id, fence, outcome, delay_s, error, result)
), decided AS (
    SELECT i.*, j.attempt, j.max_attempts,
           CASE i.outcome
               WHEN 'succeeded' THEN 'succeeded'
               WHEN 'cancelled' THEN 'cancelled'
               WHEN 'dead' THEN 'dead'
               WHEN 'snooze' THEN 'waiting'
               WHEN 'retry' THEN CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'waiting' END
           END::job_state AS next_state
    FROM input i JOIN jobs j ON j.id = i.id
    WHERE j.fence = i.fence AND j.state = 'running'
    FOR UPDATE OF j
), updated AS (
    UPDATE jobs j
    SET state = d.next_state,
        attempt = CASE WHEN d.outcome = 'snooze' THEN j.attempt - 1 ELSE j.attempt END,
        snoozes = j.snoozes + CASE WHEN d.outcome = 'snooze' THEN 1 ELSE 0 END,
        run_at = CASE WHEN d.next_state = 'waiting'
                      THEN herald_now() + make_interval(secs => coalesce(d.delay_s, 0))
                      ELSE j.run_at END,
        errors = CASE WHEN d.error IS NULL THEN j.errors
                      ELSE (CASE WHEN jsonb_array_length(j.errors) >= 20 THEN j.errors - 0
                                 ELSE j.errors END)
                           || jsonb_build_array(d.error || jsonb_build_object(
                                  'at', herald_now(), 'attempt', j.attempt)) END,
        result = coalesce(d.result, j.result),
        lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = CASE WHEN d.next_state IN ('succeeded', 'dead', 'cancelled')
                           THEN herald_now() END
    FROM decided d
    WHERE j.id = d.id
    RETURNING j.id, j.state, j.kind, j.queue, j.key, j.version, j.payload, j.attempt,
              j.step, j.checkpoint, j.errors, d.outcome
), dead AS (
    INSERT INTO dead_letters (job_id, kind, queue, key, version, payload, attempt, step,
                              cleanup, errors, reason)
    SELECT u.id, u.kind, u.queue, u.key, u.version, u.payload, u.attempt, u.step,
           u.checkpoint, u.errors,
           CASE WHEN u.outcome = 'dead' THEN 'permanent' ELSE 'exhausted' END
    FROM updated u WHERE u.state = 'dead'
), stale AS (
    INSERT INTO stale_writes (job_id, fence, operation, owner)
    SELECT i.id, i.fence, i.outcome, %(owner)s FROM input i
    WHERE NOT EXISTS (SELECT 1 FROM updated u WHERE u.id = i.id)
)
SELECT id, state FROM updated
