SELECT id, kind, queue, key, version, payload, priority, run_at, state, step, checkpoint,
       result, attempt, max_attempts, lease_owner, lease_expires_at, fence, idempotency_key,
       errors, snoozes, rescues, strikes, replay_of, created_at, attempted_at, finished_at
FROM jobs WHERE id = %(id)s
