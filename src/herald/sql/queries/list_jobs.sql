SELECT id, kind, queue, key, version, state, step, attempt, max_attempts, priority, run_at,
       created_at, finished_at, errors -> -1 ->> 'message' AS last_error
FROM jobs
WHERE (%(state)s::job_state IS NULL OR state = %(state)s::job_state)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(key)s::text IS NULL OR key = %(key)s)
ORDER BY id DESC
LIMIT %(limit)s
