-- Which of these worker processes have started running jobs (booted and claiming).
SELECT DISTINCT pid FROM fault_executions WHERE pid = ANY(%(pids)s::integer[])
