-- Save a pipeline's progress, fenced: a worker that lost its lease writes nothing.
WITH saved AS (
    UPDATE jobs
    SET step = %(step)s, checkpoint = %(checkpoint)s::jsonb
    WHERE id = %(id)s AND fence = %(fence)s AND state = 'running'
    RETURNING id
), stale AS (
    SELECT count(herald_stale_write(%(id)s, %(fence)s, 'checkpoint', %(owner)s)) AS recorded
    WHERE NOT EXISTS (SELECT 1 FROM saved)
)
-- `stale` is read by a condition on no row (evaluated once, before any row is read),
-- so its stale writes are recorded even when nothing was saved: a CTE that only reads
-- runs when, and as far as, it is read.
SELECT s.id FROM saved s WHERE (SELECT recorded FROM stale) >= 0
