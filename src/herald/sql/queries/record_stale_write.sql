INSERT INTO stale_writes (job_id, fence, operation, owner)
VALUES (%(id)s, %(fence)s, %(operation)s, %(owner)s)
