-- A version with what its publication job shows now: its state, step, last error and
-- progress (the version row itself follows only when the job's steps move it).
SELECT v.*, j.state::text AS job_state, j.step AS job_step,
       j.checkpoint -> 'progress' AS job_progress, j.errors -> -1 ->> 'message' AS job_error
FROM dataset_versions v LEFT JOIN jobs j ON j.id = v.job_id
WHERE v.dataset_id = %(dataset_id)s AND v.version = %(version)s
