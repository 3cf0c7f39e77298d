-- The generations' records belong to a tenant (see the core's 0016_tenants): datasets,
-- manifests, runs, candidates, publications, decisions, the outbox and its deliveries,
-- subscriptions, quarantine and backfills.
SELECT herald_isolate(t)
FROM unnest(ARRAY['gen_datasets', 'gen_input_manifests', 'gen_runs', 'gen_run_partitions',
                  'gen_candidates', 'gen_publications', 'gen_current', 'gen_decisions',
                  'gen_outbox', 'gen_subscriptions', 'gen_deliveries', 'gen_quarantine',
                  'gen_backfills']::regclass[]) AS t;
