-- Tasks of a partition not settled yet, with their job's lease and fence.
SELECT p.run_id, p.partition, p.state, p.job_id, r.purpose, r.policy, r.intent,
       j.state AS job_state, j.attempt, j.max_attempts, j.fence, j.lease_owner,
       j.lease_expires_at, j.run_at, j.checkpoint, j.errors -> -1 AS last_error
FROM gen_run_partitions p
JOIN gen_runs r ON r.id = p.run_id
LEFT JOIN jobs j ON j.id = p.job_id
WHERE r.dataset = %(dataset)s AND p.partition = %(partition)s
  AND p.state IN ('queued', 'building', 'waiting')
ORDER BY p.run_id
