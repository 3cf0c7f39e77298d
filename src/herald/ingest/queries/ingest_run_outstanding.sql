-- What is left to do in a run: rows pending (claimable, or locked by a batch in flight
-- elsewhere) and rows in processing, and whether the run is staged (rows of any other
-- run are never claimable).
SELECT count(*) FILTER (WHERE s.state = 'pending') AS pending,
       count(*) FILTER (WHERE s.state = 'processing') AS processing,
       EXISTS (SELECT 1 FROM ingest_runs WHERE id = %(run_id)s AND state = 'staged') AS staged
FROM ingest_staged s WHERE s.run_id = %(run_id)s AND s.state IN ('pending', 'processing')
