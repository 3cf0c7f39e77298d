-- Cancel jobs that are still running (their worker is dead): terminal at once, lease
-- dropped, so every later fenced write of the old attempt is refused.
UPDATE jobs
SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = herald_now()
WHERE id = ANY(%(ids)s::bigint[]) AND state = 'running'
RETURNING id, extract(epoch FROM clock_timestamp())::float8 AS at
