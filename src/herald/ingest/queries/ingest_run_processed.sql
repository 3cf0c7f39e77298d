-- A staged run with nothing left pending or processing is processed.
UPDATE ingest_runs r
SET state = 'processed', finished_at = herald_now(),
    rows_done = (SELECT count(*) FROM ingest_staged WHERE run_id = r.id AND state = 'done'),
    rows_failed = (SELECT count(*) FROM ingest_staged WHERE run_id = r.id AND state = 'failed')
WHERE r.id = %(run_id)s AND r.state = 'staged'
  AND NOT EXISTS (
      SELECT 1 FROM ingest_staged s
      WHERE s.run_id = r.id AND s.state IN ('pending', 'processing')
  )
RETURNING r.id, r.provider, r.rows_done, r.rows_failed
