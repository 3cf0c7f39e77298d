-- The fields a manual action on a job changes, locked for the action's transaction.
SELECT id, kind, queue, key, version, state::text AS state, run_at, attempt,
       max_attempts, fence, lease_owner, lease_expires_at, finished_at
FROM jobs
WHERE id = %(id)s
FOR UPDATE
