-- Count what a fenced staging write added to its run.
UPDATE ingest_runs
SET rows_staged = rows_staged + %(rows)s, rejected = rejected + %(rejected)s
WHERE id = %(run_id)s AND state = 'fetching' AND job_fence = %(fence)s
RETURNING rows_staged
