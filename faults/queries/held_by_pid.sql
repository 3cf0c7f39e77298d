-- Jobs still running under a lease taken by the worker process with this pid.
SELECT DISTINCT j.id
FROM fault_executions e JOIN jobs j ON j.id = e.job_id AND j.fence = e.fence
WHERE e.pid = %(pid)s AND j.state = 'running'
