-- Jobs newest first, filtered by state, kind, queue, object key, the API key that
-- submitted them and creation time; before_id pages backwards.
SELECT j.id, j.kind, j.queue, j.key, j.version, j.state::text AS state, j.step, j.attempt,
       j.max_attempts, j.priority, j.run_at, j.created_at, j.finished_at,
       j.errors -> -1 ->> 'message' AS last_error, k.name AS submitted_by
FROM jobs j
LEFT JOIN api_submissions s ON s.job_id = j.id
LEFT JOIN api_keys k ON k.id = s.api_key_id
WHERE (%(state)s::job_state IS NULL OR j.state = %(state)s::job_state)
  AND (%(kind)s::text IS NULL OR j.kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
  AND (%(key)s::text IS NULL OR j.key = %(key)s)
  AND (%(api_key)s::text IS NULL OR k.name = %(api_key)s)
  AND (%(created_from)s::timestamptz IS NULL OR j.created_at >= %(created_from)s)
  AND (%(created_to)s::timestamptz IS NULL OR j.created_at < %(created_to)s)
  AND (%(before_id)s::bigint IS NULL OR j.id < %(before_id)s)
ORDER BY j.id DESC
LIMIT %(limit)s
