-- Admit one job. For a keyed job the version is the object's next number; if an active
-- job already exists for (kind, key) the partial unique index rejects the insert
-- (ON CONFLICT DO NOTHING) and the active job is reported as already in progress.
-- No row back means the conflicting job finished while we looked: the caller retries.
WITH args AS (
    SELECT %(kind)s::text AS kind, %(queue)s::text AS queue, %(key)s::text AS key,
           %(payload)s::jsonb AS payload, %(priority)s::smallint AS priority,
           coalesce(%(run_at)s::timestamptz, herald_now()) AS run_at,
           %(max_attempts)s::integer AS max_attempts,
           %(idempotency_key)s::text AS idempotency_key,
           %(replay_of)s::bigint AS replay_of
), ins AS (
    INSERT INTO jobs (kind, queue, key, version, payload, priority, run_at, max_attempts,
                      idempotency_key, replay_of)
    SELECT a.kind, a.queue, a.key,
           CASE WHEN a.key IS NULL THEN 1
                ELSE coalesce((SELECT v.last_version FROM key_versions v
                               WHERE v.kind = a.kind AND v.key = a.key), 0) + 1 END,
           a.payload, a.priority, a.run_at, a.max_attempts, a.idempotency_key, a.replay_of
    FROM args a
    ON CONFLICT DO NOTHING
    RETURNING id, kind, key, version, queue, run_at
), bump AS (
    INSERT INTO key_versions (kind, key, last_version)
    SELECT kind, key, version FROM ins WHERE key IS NOT NULL
    ON CONFLICT (tenant_id, kind, key)
    DO UPDATE SET last_version = greatest(key_versions.last_version, excluded.last_version)
), notified AS (
    SELECT pg_notify(%(channel)s, ins.queue) FROM ins
    WHERE %(notify)s AND ins.run_at <= herald_now()
)
SELECT 'created' AS outcome, ins.id, ins.version, (SELECT count(*) FROM notified) AS notified
FROM ins
UNION ALL
SELECT 'in_progress', j.id, j.version, 0
FROM jobs j, args a
WHERE NOT EXISTS (SELECT 1 FROM ins)
  AND j.kind = a.kind AND j.key = a.key AND j.state IN ('waiting', 'running')
