UPDATE fault_executions
SET ended_at = clock_timestamp(),
    outcome = %(outcome)s,
    lease_seen_until = (SELECT lease_expires_at FROM jobs
                        WHERE id = %(job_id)s AND fence = %(fence)s AND state = 'running')
WHERE id = %(id)s
