-- One run with its rows counted by state.
SELECT r.id, r.provider, r.state, r.job_id, r.snapshot_at, r.started_at, r.staged_at,
       r.finished_at, r.rows_staged, r.rejected, r.rows_done, r.rows_failed, r.bytes,
       r.http_attempts, r.error,
       (SELECT coalesce(jsonb_object_agg(state, n), '{}')
        FROM (SELECT state, count(*) AS n FROM ingest_staged WHERE run_id = r.id GROUP BY state) c
       ) AS rows_by_state,
       (SELECT count(*) FROM ingest_quarantine q WHERE q.run_id = r.id) AS quarantined
FROM ingest_runs r WHERE r.id = %(run_id)s
