SELECT job_id, attempt, fence, step, worker, pid, outcome,
       extract(epoch FROM started_at)::float8 AS started,
       extract(epoch FROM ended_at)::float8 AS ended,
       extract(epoch FROM lease_seen_until)::float8 AS lease_until
FROM fault_executions ORDER BY job_id, fence, started_at
