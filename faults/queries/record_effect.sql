INSERT INTO fault_effects (job_id, attempt, fence, worker)
VALUES (%(job_id)s, %(attempt)s, %(fence)s, %(worker)s)
