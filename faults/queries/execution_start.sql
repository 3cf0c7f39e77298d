INSERT INTO fault_executions (job_id, attempt, fence, step, worker, pid)
VALUES (%(job_id)s, %(attempt)s, %(fence)s, %(step)s, %(worker)s, %(pid)s)
RETURNING id
