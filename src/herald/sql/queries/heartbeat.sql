-- Extend the leases a worker still holds; a job missing from the answer has lost its
-- lease, and the refused extension is recorded as a stale write.
WITH held AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS h(id, fence)
), extended AS (
    UPDATE jobs j
    SET lease_expires_at = herald_now() + make_interval(secs => %(lease_s)s)
    FROM held h
    WHERE j.id = h.id AND j.fence = h.fence AND j.state = 'running'
    RETURNING j.id
), stale AS (
    INSERT INTO stale_writes (tenant_id, job_id, fence, operation, owner)
    SELECT coalesce((SELECT j.tenant_id FROM jobs j WHERE j.id = h.id), 'default'),
           h.id, h.fence, 'heartbeat', %(owner)s
    FROM held h
    WHERE NOT EXISTS (SELECT 1 FROM extended e WHERE e.id = h.id)
)
SELECT id FROM extended
