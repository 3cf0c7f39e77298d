-- Cleanup (compensation) backlog as (metric, help, labels, value) rows.
SELECT 'herald_cleanup_backlog' AS metric,
       'Dead letters whose compensation is still owed, by kind' AS help,
       jsonb_build_object('kind', kind) AS labels, count(*)::float8 AS value
FROM dead_letters WHERE cleanup_state = 'pending' GROUP BY kind
UNION ALL
SELECT 'herald_cleanup_failing', 'Pending compensations that failed at least once, by kind',
       jsonb_build_object('kind', kind), count(*)::float8
FROM dead_letters WHERE cleanup_state = 'pending' AND cleanup_attempts > 0 GROUP BY kind
UNION ALL
SELECT 'herald_cleanup_oldest_pending_seconds', 'Age of the oldest compensation still owed',
       '{}'::jsonb,
       coalesce(extract(epoch FROM herald_now() - min(created_at)), 0)::float8
FROM dead_letters WHERE cleanup_state = 'pending'
