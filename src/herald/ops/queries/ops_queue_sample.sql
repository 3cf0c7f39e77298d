-- One sampling pass: every queue holding waiting or running jobs now, in one row.
-- A pass in the same instant as another (two holders during a hand-over) is dropped.
-- The clock is read once (not once per row), and the waiting and running jobs are counted
-- apart so each part can read its own partial index. The pass still visits every waiting
-- job: its cost grows with the backlog (about 0.3 s for 1,000,000 waiting, one core), so
-- the duty spaces its passes by what the last one cost (see herald.ops.queue_samples).
WITH clock AS MATERIALIZED (SELECT herald_now() AS now),
counted AS (
    SELECT queue,
           count(*) FILTER (WHERE run_at <= clock.now) AS available,
           count(*) FILTER (WHERE run_at > clock.now) AS scheduled,
           0 AS running,
           min(run_at) FILTER (WHERE run_at <= clock.now) AS oldest_due
    FROM jobs, clock
    WHERE state = 'waiting'
    GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, count(*), NULL
    FROM jobs
    WHERE state = 'running'
    GROUP BY queue
),
per_queue AS (
    SELECT queue, sum(available) AS available, sum(scheduled) AS scheduled,
           sum(running) AS running, min(oldest_due) AS oldest_due
    FROM counted
    GROUP BY queue
)
INSERT INTO queue_samples (at, queues)
SELECT clock.now, coalesce(jsonb_object_agg(queue, jsonb_build_object(
           'available', available, 'scheduled', scheduled, 'running', running,
           'oldest_waiting_s', round(extract(epoch FROM clock.now - oldest_due), 1)))
           FILTER (WHERE queue IS NOT NULL), '{}'::jsonb)
FROM clock LEFT JOIN per_queue ON true
GROUP BY clock.now
ON CONFLICT (at) DO NOTHING
