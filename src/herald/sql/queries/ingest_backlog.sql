-- Pending rows of staged runs and the age of the oldest (for the metrics).
SELECT count(*) AS pending,
       coalesce(extract(epoch FROM herald_now() - min(r.staged_at)), 0)::float8 AS oldest_s
FROM ingest_staged s JOIN ingest_runs r ON r.id = s.run_id
WHERE s.state = 'pending' AND r.state = 'staged'
