-- Take a slot of key for this attempt (job id + fence), unless limit live holders exist.
-- A holder is live while its job is running under the fence that took the slot, so
-- slots of finished, snoozed, cancelled or rescued attempts are free again by themselves.
-- An attempt that already holds a live slot gets that slot back.
WITH live AS (
    SELECT s.slot, s.job_id, s.fence
    FROM concurrency_slots s
    JOIN jobs j ON j.id = s.job_id AND j.fence = s.fence AND j.state = 'running'
    WHERE s.key = %(key)s
), mine AS (
    SELECT slot FROM live WHERE job_id = %(job_id)s AND fence = %(fence)s
), free AS (
    SELECT g AS slot FROM generate_series(0, %(limit)s::integer - 1) g
    WHERE NOT EXISTS (SELECT 1 FROM live l WHERE l.slot = g)
      AND NOT EXISTS (SELECT 1 FROM mine)
      AND (SELECT count(*) FROM live) < %(limit)s::integer
    ORDER BY g
    LIMIT 1
), taken AS (
    INSERT INTO concurrency_slots AS s (key, slot, job_id, fence, acquired_at)
    SELECT %(key)s, f.slot, %(job_id)s, %(fence)s, herald_now() FROM free f
    ON CONFLICT (tenant_id, key, slot) DO UPDATE
    SET job_id = excluded.job_id, fence = excluded.fence, acquired_at = excluded.acquired_at
    RETURNING s.slot
)
SELECT slot FROM taken
UNION ALL
SELECT slot FROM mine
