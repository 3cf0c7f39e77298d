-- Ingestion figures as (metric, help, labels, value) rows. Row counts by state read the
-- backlog (runs still staged) only; finished runs keep their totals on the run row.
SELECT 'herald_ingest_runs' AS metric,
       'Ingestion runs retained, by provider and state (fetch outcomes)' AS help,
       jsonb_build_object('provider', provider, 'state', state) AS labels,
       count(*)::float8 AS value
FROM ingest_runs GROUP BY provider, state
UNION ALL
SELECT 'herald_ingest_fetch_seconds_last', 'Duration of the latest complete fetch',
       jsonb_build_object('provider', provider),
       (array_agg(extract(epoch FROM staged_at - started_at) ORDER BY id DESC))[1]::float8
FROM ingest_runs WHERE staged_at IS NOT NULL GROUP BY provider
UNION ALL
SELECT 'herald_ingest_fetch_seconds_sum', 'Time spent in complete fetches, in total',
       jsonb_build_object('provider', provider),
       sum(extract(epoch FROM staged_at - started_at))::float8
FROM ingest_runs WHERE staged_at IS NOT NULL GROUP BY provider
UNION ALL
SELECT 'herald_ingest_rows_staged', 'Rows staged by retained runs, in total',
       jsonb_build_object('provider', provider), sum(rows_staged)::float8
FROM ingest_runs GROUP BY provider
UNION ALL
SELECT 'herald_ingest_rows_processed', 'Rows of processed runs, by outcome',
       jsonb_build_object('provider', provider, 'outcome', o.outcome), sum(o.n)::float8
FROM ingest_runs r
CROSS JOIN LATERAL (VALUES ('done', r.rows_done), ('failed', r.rows_failed)) AS o(outcome, n)
WHERE r.state = 'processed' GROUP BY provider, o.outcome
UNION ALL
SELECT 'herald_ingest_backlog_rows', 'Rows of staged runs, by state',
       jsonb_build_object('state', s.state), count(*)::float8
FROM ingest_staged s JOIN ingest_runs r ON r.id = s.run_id
WHERE r.state = 'staged' GROUP BY s.state
UNION ALL
SELECT 'herald_ingest_backlog_retries', 'Extra attempts made on rows of staged runs',
       '{}'::jsonb, coalesce(sum(s.attempts - 1) FILTER (WHERE s.attempts > 1), 0)::float8
FROM ingest_staged s JOIN ingest_runs r ON r.id = s.run_id WHERE r.state = 'staged'
UNION ALL
SELECT 'herald_ingest_requeued_rows', 'Retained rows that were requeued after being stuck in processing',
       '{}'::jsonb, count(*)::float8
FROM ingest_staged WHERE last_error LIKE 'requeued:%'
UNION ALL
SELECT 'herald_ingest_pending_rows', 'Rows pending in staged runs', '{}'::jsonb, b.pending::float8
FROM (SELECT count(*) AS pending FROM ingest_staged s JOIN ingest_runs r ON r.id = s.run_id
      WHERE s.state = 'pending' AND r.state = 'staged') b
UNION ALL
SELECT 'herald_ingest_oldest_pending_seconds', 'Age of the oldest staged run with pending rows',
       '{}'::jsonb,
       coalesce(extract(epoch FROM herald_now() - min(r.staged_at)), 0)::float8
FROM ingest_runs r
WHERE r.state = 'staged' AND EXISTS (SELECT 1 FROM ingest_staged s WHERE s.run_id = r.id AND s.state = 'pending')
UNION ALL
SELECT 'herald_ingest_quarantined', 'Quarantined records not yet expired, by provider',
       jsonb_build_object('provider', provider), count(*)::float8
FROM ingest_quarantine WHERE expires_at > herald_now() GROUP BY provider
