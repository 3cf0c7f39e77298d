-- Schedule figures as (metric, help, labels, value) rows, grouped by kind.
SELECT 'herald_schedule_lag_seconds' AS metric,
       'How far the most overdue unpaused schedule is past its due time' AS help,
       jsonb_build_object('kind', kind) AS labels,
       max(greatest(extract(epoch FROM herald_now() - next_due_at), 0))::float8 AS value
FROM schedules WHERE NOT paused GROUP BY kind
UNION ALL
SELECT 'herald_schedule_coalesced_slots',
       'Missed slots folded into one catch-up fire, in total',
       jsonb_build_object('kind', kind), sum(coalesced_count)::float8
FROM schedules GROUP BY kind
UNION ALL
SELECT 'herald_schedule_skipped_slots',
       'Slots passed over without firing, in total',
       jsonb_build_object('kind', kind), sum(skipped_count)::float8
FROM schedules GROUP BY kind
UNION ALL
SELECT 'herald_schedules', 'Schedules, by kind and whether paused',
       jsonb_build_object('kind', kind, 'paused', paused::text), count(*)::float8
FROM schedules GROUP BY kind, paused
UNION ALL
SELECT 'herald_schedule_failed_fires',
       'Scheduler passes whose enqueue failed (the schedule shows the last error)',
       jsonb_build_object('kind', kind), sum(failed_count)::float8
FROM schedules GROUP BY kind
