-- The snapshot arrived whole: its rows become claimable. Runs in the fetch job's
-- fenced completion transaction, so a fetcher that lost its lease cannot commit it.
UPDATE ingest_runs
SET state = 'staged', staged_at = herald_now(), bytes = %(bytes)s, http_attempts = %(attempts)s
WHERE id = %(run_id)s AND state = 'fetching' AND job_fence = %(fence)s
RETURNING id, rows_staged, rejected
