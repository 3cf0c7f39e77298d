-- The dead letter, locked until the end of the manual action's transaction.
SELECT id, job_id, kind, queue, key, version, payload, attempt, step, cleanup, errors,
       reason, created_at, cleanup_state, cleanup_attempts, cleanup_last_error,
       cleanup_next_at, cleanup_done_at, replayed_job_id
FROM dead_letters
WHERE id = %(id)s
FOR UPDATE
