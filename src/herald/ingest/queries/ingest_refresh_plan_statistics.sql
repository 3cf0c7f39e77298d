-- After a run is processed: analyze the canonical plans if the run was large against
-- what the statistics describe (see migration 0033).
SELECT ingest_refresh_plan_statistics(%(processed)s, %(at_least)s) AS analyzed
