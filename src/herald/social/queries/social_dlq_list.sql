-- Dead letters of one service: the kinds named "<service>.<...>", newest first.
SELECT d.id, d.job_id, d.kind, d.queue, d.key, d.version, d.attempt, d.reason, d.step,
       d.payload, d.errors -> -1 ->> 'message' AS last_error, d.created_at,
       d.cleanup_state, d.replayed_job_id
FROM dead_letters d
WHERE starts_with(d.kind, %(service)s || '.')
  AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s)
ORDER BY d.id DESC
LIMIT %(limit)s
