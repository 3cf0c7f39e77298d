-- Writes of a job's attempts that the fence refused (heartbeat, checkpoint, completion).
SELECT job_id, fence, operation, owner FROM stale_writes WHERE job_id = %(job_id)s ORDER BY fence
