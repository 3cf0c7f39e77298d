-- Record the outcomes of a batch of attempts, each fenced by (id, fence).
--   succeeded | cancelled   -> terminal
--   dead                    -> terminal, dead letter written in this statement
--   retry                   -> waiting after delay_s, or dead when attempts are spent
--   snooze                  -> waiting after delay_s; the attempt is given back
-- Writes whose fence is stale change nothing and are recorded in stale_writes.
-- One UPDATE decides and writes: its WHERE is re-checked on the row's latest version,
-- so no separate row lock is taken (and logged) before the update. The clock is read
-- once (MATERIALIZED), not evaluated again for every row.
WITH clock AS MATERIALIZED (SELECT herald_now() AS now), input AS (
    SELECT *,
           CASE outcome
               WHEN 'succeeded' THEN 'succeeded'
               WHEN 'cancelled' THEN 'cancelled'
               WHEN 'dead' THEN 'dead'
               WHEN 'snooze' THEN 'waiting'
           END::job_state AS fixed_state  -- NULL for 'retry': decided on the row below
    FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(outcomes)s::text[],
                %(delays)s::float8[], %(errors)s::jsonb[], %(results)s::jsonb[])
        AS t(id, fence, outcome, delay_s, error, result)
), updated AS (
    UPDATE jobs j
    SET state = CASE WHEN i.outcome <> 'retry' THEN i.fixed_state
                     WHEN j.attempt >= j.max_attempts THEN 'dead'::job_state
                     ELSE 'waiting'::job_state END,
        attempt = CASE WHEN i.outcome = 'snooze' THEN j.attempt - 1 ELSE j.attempt END,
        snoozes = j.snoozes + CASE WHEN i.outcome = 'snooze' THEN 1 ELSE 0 END,
        run_at = CASE WHEN i.outcome = 'snooze'
                           OR (i.outcome = 'retry' AND j.attempt < j.max_attempts)
                      THEN clk.now + make_interval(secs => coalesce(i.delay_s, 0))
                      ELSE j.run_at END,
        errors = CASE WHEN i.error IS NULL THEN j.errors
                      ELSE herald_append_error(j.errors, i.error || jsonb_build_object(
                               'at', clk.now, 'attempt', j.attempt)) END,
        result = coalesce(i.result, j.result),
        strikes = 0,  -- the attempt ended by itself: it did not take its worker down
        lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = CASE WHEN i.outcome IN ('succeeded', 'dead', 'cancelled')
                                OR (i.outcome = 'retry' AND j.attempt >= j.max_attempts)
                           THEN clk.now END
    FROM input i, clock clk
    WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running'
    -- the whole row, for its dead letter, is carried along only for jobs that just died.
    RETURNING j.id, j.state, i.outcome, CASE WHEN j.state = 'dead' THEN j END AS dead_job
), dead AS (
    SELECT count(herald_dead_letter(u.dead_job, CASE WHEN u.outcome = 'dead' THEN 'permanent'
                                                     ELSE 'exhausted' END)) AS written
    FROM updated u WHERE u.state = 'dead'
), stale AS (
    SELECT count(herald_stale_write(i.id, i.fence, i.outcome, %(owner)s)) AS recorded
    FROM input i
    WHERE NOT EXISTS (SELECT 1 FROM updated u WHERE u.id = i.id)
)
-- `dead` and `stale` are read by a condition on no row (evaluated once, before any row
-- is read): a CTE that only reads runs when, and as far as, it is read.
SELECT id, state FROM updated
WHERE (SELECT written FROM dead) >= 0 AND (SELECT recorded FROM stale) >= 0
