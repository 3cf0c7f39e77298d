SELECT d.id, d.job_id, d.kind, d.queue, d.key, d.version, d.payload, d.attempt, d.step,
       d.cleanup, d.errors, d.reason, d.created_at, d.cleanup_state, d.cleanup_attempts,
       d.cleanup_last_error, d.cleanup_next_at, d.cleanup_done_at, d.replayed_job_id,
       j.state::text AS job_state
FROM dead_letters d LEFT JOIN jobs j ON j.id = d.job_id
WHERE d.id = %(id)s
