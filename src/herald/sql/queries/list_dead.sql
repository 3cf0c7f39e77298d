SELECT d.id, d.job_id, d.kind, d.queue, d.key, d.version, d.attempt, d.reason, d.step,
       d.errors -> -1 ->> 'message' AS last_error, d.created_at
FROM dead_letters d
WHERE (%(kind)s::text IS NULL OR d.kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR d.queue = %(queue)s)
  AND (%(key)s::text IS NULL OR d.key = %(key)s)
ORDER BY d.id DESC
LIMIT %(limit)s
