-- Admit many jobs in one round trip, one notification per queue for the batch.
-- Rows come back in input order (ids follow the ORDER BY of the insert); keyed rows
-- that met an active job for their object are simply absent and resolved by the caller.
-- Each column arrives as one JSON array (parsed once); ROWS FROM zips them by position.
WITH input AS (
    SELECT * FROM ROWS FROM (
        jsonb_array_elements_text(%(kinds)s::jsonb),
        jsonb_array_elements_text(%(queues)s::jsonb),
        jsonb_array_elements_text(%(keys)s::jsonb),
        jsonb_array_elements(%(payloads)s::jsonb),
        jsonb_array_elements_text(%(priorities)s::jsonb),
        jsonb_array_elements_text(%(run_ats)s::jsonb),
        jsonb_array_elements_text(%(max_attempts)s::jsonb)
    ) WITH ORDINALITY AS t(kind, queue, key, payload, priority, run_at, max_attempts, ord)
), ins AS (
    INSERT INTO jobs (kind, queue, key, version, payload, priority, run_at, max_attempts)
    SELECT i.kind, i.queue, i.key,
           CASE WHEN i.key IS NULL THEN 1 ELSE coalesce(v.last_version, 0) + 1 END,
           i.payload, i.priority::smallint, coalesce(i.run_at::timestamptz, herald_now()),
           i.max_attempts::integer
    FROM input i
    LEFT JOIN key_versions v ON i.key IS NOT NULL AND v.kind = i.kind AND v.key = i.key
    ORDER BY i.ord
    ON CONFLICT DO NOTHING
    RETURNING id, kind, key, version, queue, run_at
), bump AS (
    INSERT INTO key_versions (kind, key, last_version)
    SELECT kind, key, max(version) FROM ins WHERE key IS NOT NULL GROUP BY kind, key
    ON CONFLICT (tenant_id, kind, key)
    DO UPDATE SET last_version = greatest(key_versions.last_version, excluded.last_version)
), notified AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM ins WHERE run_at <= herald_now()) q
    WHERE %(notify)s
)
SELECT ins.id, ins.kind, ins.key, ins.version, (SELECT count(*) FROM notified) AS notified
FROM ins ORDER BY ins.id
