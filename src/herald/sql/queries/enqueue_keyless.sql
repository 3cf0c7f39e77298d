-- Admit one job without a key: no version to look up and no active job to conflict
-- with, so a plain insert (cheaper to plan and run than `enqueue`, on the latency path).
WITH ins AS (
    INSERT INTO jobs (kind, queue, payload, priority, run_at, max_attempts,
                      idempotency_key, replay_of)
    VALUES (%(kind)s::text, %(queue)s::text, %(payload)s::jsonb, %(priority)s::smallint,
            coalesce(%(run_at)s::timestamptz, herald_now()), %(max_attempts)s::integer,
            %(idempotency_key)s::text, %(replay_of)s::bigint)
    RETURNING id, queue, run_at
), notified AS (
    SELECT pg_notify(%(channel)s, ins.queue) FROM ins
    WHERE %(notify)s AND ins.run_at <= herald_now()
)
SELECT 'created' AS outcome, ins.id, 1 AS version, (SELECT count(*) FROM notified) AS notified
FROM ins
