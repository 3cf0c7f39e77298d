-- Staged runs with work left and no processing job waiting or running for them.
SELECT r.id
FROM ingest_runs r
WHERE r.state = 'staged'
  AND NOT EXISTS (
      SELECT 1 FROM jobs j
      WHERE j.kind = %(kind)s AND j.state IN ('waiting', 'running')
        AND (j.payload ->> 'run_id')::bigint = r.id
  )
ORDER BY r.id
LIMIT 100
