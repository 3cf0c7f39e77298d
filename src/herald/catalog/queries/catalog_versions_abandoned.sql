-- Versions still in flight on their row whose publication job ended without publishing
-- (cancelled, or dead before its cleanup ran) at least grace_s ago, by when a worker
-- still running the job has noticed: what the job produced, to undo it.
SELECT v.dataset_id, v.version, j.id AS job_id, j.key, j.payload, j.state::text AS reason,
       j.checkpoint AS cleanup, j.errors
FROM dataset_versions v JOIN jobs j ON j.id = v.job_id
WHERE v.state IN ('requested', 'exporting', 'exported') AND j.state IN ('cancelled', 'dead')
  AND j.finished_at <= herald_now() - make_interval(secs => %(grace_s)s)
ORDER BY v.dataset_id, v.version
LIMIT %(limit)s
