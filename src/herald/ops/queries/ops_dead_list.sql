-- Dead letters, newest first, filtered by kind, queue, key, cleanup state and a
-- case-insensitive fragment of any recorded error message.
SELECT d.id, d.job_id, d.kind, d.queue, d.key, d.version, d.attempt, d.reason, d.step,
       d.errors -> -1 ->> 'message' AS last_error, d.created_at,
       d.cleanup_state, d.cleanup_attempts, d.cleanup_last_error, d.cleanup_next_at,
       d.replayed_job_id
FROM dead_letters d
WHERE (%(kind)s::text IS NULL OR d.kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR d.queue = %(queue)s)
  AND (%(key)s::text IS NULL OR d.key = %(key)s)
  AND (%(cleanup_state)s::text IS NULL OR d.cleanup_state = %(cleanup_state)s)
  AND (%(before_id)s::bigint IS NULL OR d.id < %(before_id)s)
  AND (%(error)s::text IS NULL OR EXISTS (
          SELECT 1 FROM jsonb_array_elements(d.errors) e
          WHERE strpos(lower(coalesce(e ->> 'message', '')), lower(%(error)s)) > 0))
ORDER BY d.id DESC
LIMIT %(limit)s
