-- The fetch failed: the run, and every row it staged, is never processed.
UPDATE ingest_runs
SET state = 'failed', finished_at = herald_now(), error = left(%(error)s, 4000),
    http_attempts = %(attempts)s
WHERE id = %(run_id)s AND state = 'fetching' AND job_fence = %(fence)s
RETURNING id
