SELECT id, provider, state, job_id, snapshot_at, started_at, staged_at, finished_at,
       rows_staged, rejected, rows_done, rows_failed, bytes, http_attempts, error
FROM ingest_runs
WHERE (%(provider)s::text IS NULL OR provider = %(provider)s)
ORDER BY id DESC
LIMIT %(limit)s
