-- A run's task for one partition with its job, as an action's review reads it.
SELECT t.run_id, t.partition, t.state, t.detail, t.job_id, r.dataset, r.purpose,
       r.definition_version, r.policy, j.state AS job_state, j.lease_owner, j.fence
FROM gen_run_partitions t
JOIN gen_runs r ON r.id = t.run_id
LEFT JOIN jobs j ON j.id = t.job_id
WHERE t.run_id = %(run_id)s AND t.partition = %(partition)s
