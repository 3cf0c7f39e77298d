-- Cancel a waiting or running job. A running job loses its lease here: its worker's
-- later heartbeat, checkpoint and finish find state <> 'running' and are stale writes.
UPDATE jobs
SET state = 'cancelled',
    fence = CASE WHEN state = 'running' THEN fence + 1 ELSE fence END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    strikes = 0,
    finished_at = herald_now(),
    errors = herald_append_error(errors, jsonb_build_object(
                 'at', herald_now(), 'attempt', attempt, 'kind', 'cancelled',
                 'message', 'cancelled by ' || %(actor)s || ': ' || %(reason)s))
WHERE id = %(id)s AND state IN ('waiting', 'running')
RETURNING id, kind, queue, key, version, state::text AS state, run_at, attempt,
          max_attempts, fence, lease_owner, lease_expires_at, finished_at
