SELECT p.*, j.state AS job_state, j.attempt, j.fence, j.lease_owner, j.lease_expires_at
FROM gen_run_partitions p LEFT JOIN jobs j ON j.id = p.job_id
WHERE p.run_id = %(run_id)s ORDER BY p.partition
