-- Per queue and time slot of a recent window (slot 0 is the oldest): jobs finished by
-- outcome, and failed attempts (every recorded error but a handler's own cancellation).
-- Jobs still waiting or running are read too: a retry storm shows before anything ends.
WITH bounds AS MATERIALIZED (
    SELECT herald_now() - make_interval(secs => %(window_s)s) AS since
), finished AS (
    SELECT j.queue,
           floor(extract(epoch FROM j.finished_at - b.since) / %(bucket_s)s)::int AS slot,
           count(*) FILTER (WHERE j.state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE j.state = 'dead') AS dead,
           count(*) FILTER (WHERE j.state = 'cancelled') AS cancelled
    FROM jobs j, bounds b
    WHERE j.finished_at >= b.since
    GROUP BY 1, 2
), failures AS (
    SELECT j.queue,
           floor(extract(epoch FROM (e ->> 'at')::timestamptz - b.since) / %(bucket_s)s)::int
               AS slot,
           count(*) AS failed
    FROM jobs j CROSS JOIN bounds b CROSS JOIN LATERAL jsonb_array_elements(j.errors) e
    WHERE (j.finished_at >= b.since OR j.finished_at IS NULL)
      AND j.errors <> '[]'::jsonb
      AND coalesce(e ->> 'kind', '') <> 'cancelled'
      AND (e ->> 'at')::timestamptz >= b.since
    GROUP BY 1, 2
)
SELECT coalesce(f.queue, x.queue) AS queue,
       coalesce(f.slot, x.slot) AS slot,
       coalesce(f.succeeded, 0) AS succeeded,
       coalesce(f.dead, 0) AS dead,
       coalesce(f.cancelled, 0) AS cancelled,
       coalesce(x.failed, 0) AS failed
FROM finished f FULL JOIN failures x ON x.queue = f.queue AND x.slot = f.slot
ORDER BY 1, 2
