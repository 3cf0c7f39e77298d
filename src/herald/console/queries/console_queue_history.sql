-- Per time slot of a recent window (slot 0 is the oldest) and queue: the most jobs due,
-- scheduled and running, and the oldest due job's age, over the samples in the slot. A
-- slot with samples but no queue in them comes back once with a NULL queue (all idle);
-- a slot without samples does not come back (not sampled: drawn as a gap).
WITH bounds AS MATERIALIZED (
    SELECT herald_now() - make_interval(secs => %(window_s)s) AS since
)
SELECT floor(extract(epoch FROM s.at - b.since) / %(bucket_s)s)::int AS slot,
       q.key AS queue,
       max((q.value ->> 'available')::int) AS available,
       max((q.value ->> 'scheduled')::int) AS scheduled,
       max((q.value ->> 'running')::int) AS running,
       max((q.value ->> 'oldest_waiting_s')::float8) AS oldest_waiting_s
FROM queue_samples s
CROSS JOIN bounds b
LEFT JOIN LATERAL jsonb_each(s.queues) q ON true
WHERE s.at >= b.since AND s.at <= herald_now()
GROUP BY 1, 2
ORDER BY 1, 2
