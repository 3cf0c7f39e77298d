-- A dataset's versions, highest first, each with what its publication job shows now.
SELECT v.*, j.state::text AS job_state, j.step AS job_step,
       j.checkpoint -> 'progress' AS job_progress, j.errors -> -1 ->> 'message' AS job_error
FROM dataset_versions v LEFT JOIN jobs j ON j.id = v.job_id
WHERE v.dataset_id = %(dataset_id)s
ORDER BY v.version DESC
