-- What is left to do in a run: rows pending (claimable or not) and rows in processing.
SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'processing') AS processing
FROM ingest_staged WHERE run_id = %(run_id)s AND state IN ('pending', 'processing')
