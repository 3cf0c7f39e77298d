-- Make a waiting job due now, and wake the workers of its queue.
WITH moved AS (
    UPDATE jobs SET run_at = herald_now()
    WHERE id = %(id)s AND state = 'waiting'
    RETURNING id, kind, queue, key, version, state::text AS state, run_at, attempt,
              max_attempts, fence, lease_owner, lease_expires_at, finished_at
), woken AS (
    SELECT pg_notify(%(channel)s, queue) FROM moved WHERE %(channel)s::text IS NOT NULL
)
SELECT m.*, (SELECT count(*) FROM woken) AS notified FROM moved m
