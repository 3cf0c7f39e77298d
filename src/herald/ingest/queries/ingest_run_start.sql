-- A new run owned by this fetch attempt (job id and fence); the snapshot's time is now.
INSERT INTO ingest_runs (provider, job_id, job_fence, snapshot_at)
VALUES (%(provider)s, %(job_id)s, %(fence)s, herald_now())
RETURNING id, provider, state, snapshot_at
