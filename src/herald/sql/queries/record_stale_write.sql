-- In the job's tenant (the platform context may record it): the job row names it.
INSERT INTO stale_writes (tenant_id, job_id, fence, operation, owner)
SELECT coalesce((SELECT tenant_id FROM jobs WHERE id = %(id)s), 'default'),
       %(id)s, %(fence)s, %(operation)s, %(owner)s
