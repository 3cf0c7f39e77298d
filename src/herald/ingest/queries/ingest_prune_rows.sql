-- Staged rows of runs finished (processed or failed) longer ago than the retention.
DELETE FROM ingest_staged
WHERE id IN (
    SELECT s.id FROM ingest_staged s JOIN ingest_runs r ON r.id = s.run_id
    WHERE r.state IN ('processed', 'failed')
      AND r.finished_at < herald_now() - make_interval(secs => %(keep_s)s)
    LIMIT %(limit)s
)
