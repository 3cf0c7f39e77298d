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
    SELECT count(herald_stale_write(h.id, h.fence, 'heartbeat', %(owner)s)) AS recorded
    FROM held h
    WHERE NOT EXISTS (SELECT 1 FROM extended e WHERE e.id = h.id)
)
-- `stale` is read by a condition on no row (evaluated once, before any row is read),
-- so its stale writes are recorded even when nothing was extended: a CTE that only reads
-- runs when, and as far as, it is read.
SELECT e.id FROM extended e WHERE (SELECT recorded FROM stale) >= 0
