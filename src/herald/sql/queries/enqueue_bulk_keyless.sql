-- Admit many jobs without keys in one round trip, one notification per queue.
-- Each column arrives as one JSON array (parsed once); ROWS FROM zips them by position.
-- Without keys there is no version to look up and no unique index to conflict with.
-- Ids are drawn in input order (ORDER BY ord), so the ascending ids match the input.
-- The clock is read once (MATERIALIZED), not evaluated again for every row.
WITH clock AS MATERIALIZED (SELECT herald_now() AS now), input AS (
    SELECT * FROM ROWS FROM (
        jsonb_array_elements_text(%(kinds)s::jsonb),
        jsonb_array_elements_text(%(queues)s::jsonb),
        jsonb_array_elements(%(payloads)s::jsonb),
        jsonb_array_elements_text(%(priorities)s::jsonb),
        jsonb_array_elements_text(%(run_ats)s::jsonb),
        jsonb_array_elements_text(%(max_attempts)s::jsonb)
    ) WITH ORDINALITY AS t(kind, queue, payload, priority, run_at, max_attempts, ord)
), ins AS (
    INSERT INTO jobs (kind, queue, payload, priority, run_at, max_attempts, created_at)
    SELECT i.kind, i.queue, i.payload, i.priority::smallint,
           coalesce(i.run_at::timestamptz, c.now), i.max_attempts::integer, c.now
    FROM input i, clock c
    ORDER BY i.ord
    RETURNING id, queue, run_at
), notified AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM ins WHERE run_at <= (SELECT now FROM clock)) q
    WHERE %(notify)s
)
SELECT ins.id, (SELECT count(*) FROM notified) AS notified FROM ins ORDER BY ins.id
