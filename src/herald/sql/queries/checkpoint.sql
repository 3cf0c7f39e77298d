-- Save a pipeline's progress, fenced: a worker that lost its lease writes nothing.
WITH saved AS (
    UPDATE jobs
    SET step = %(step)s, checkpoint = %(checkpoint)s::jsonb
    WHERE id = %(id)s AND fence = %(fence)s AND state = 'running'
    RETURNING id
), stale AS (
    INSERT INTO stale_writes (tenant_id, job_id, fence, operation, owner)
    SELECT coalesce((SELECT j.tenant_id FROM jobs j WHERE j.id = %(id)s), 'default'),
           %(id)s, %(fence)s, 'checkpoint', %(owner)s
    WHERE NOT EXISTS (SELECT 1 FROM saved)
)
SELECT id FROM saved
