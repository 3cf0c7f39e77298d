-- One sampling pass: every queue holding waiting or running jobs now, in one row.
-- A pass in the same instant as another (two holders during a hand-over) is dropped.
INSERT INTO queue_samples (at, queues)
SELECT herald_now(), coalesce(jsonb_object_agg(queue, jsonb_build_object(
           'available', available, 'scheduled', scheduled, 'running', running,
           'oldest_waiting_s', oldest_waiting_s)), '{}'::jsonb)
FROM (
    SELECT queue,
           count(*) FILTER (WHERE state = 'waiting' AND run_at <= herald_now()) AS available,
           count(*) FILTER (WHERE state = 'waiting' AND run_at > herald_now()) AS scheduled,
           count(*) FILTER (WHERE state = 'running') AS running,
           round(extract(epoch FROM herald_now() - min(run_at) FILTER (
               WHERE state = 'waiting' AND run_at <= herald_now())), 1) AS oldest_waiting_s
    FROM jobs
    WHERE state IN ('waiting', 'running')
    GROUP BY queue
) q
ON CONFLICT (at) DO NOTHING
