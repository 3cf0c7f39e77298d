-- Which of these worker processes hold running jobs right now (per the executions log).
SELECT DISTINCT e.pid
FROM jobs j JOIN fault_executions e ON e.job_id = j.id AND e.fence = j.fence
WHERE j.state = 'running' AND e.pid = ANY(%(pids)s::integer[])
