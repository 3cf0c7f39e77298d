-- Every dataset with what an operator looks at first: partitions published, tasks not
-- settled, candidates waiting, input held in quarantine, backfills declared.
SELECT d.name, d.owner, d.schema_version, d.created_at,
       (SELECT count(*) FROM gen_current c
         WHERE c.dataset = d.name AND c.generation > 0) AS published_partitions,
       (SELECT count(*) FROM gen_run_partitions p JOIN gen_runs r ON r.id = p.run_id
         WHERE r.dataset = d.name AND p.state IN ('queued', 'building')) AS running_tasks,
       (SELECT count(*) FROM gen_candidates k
         WHERE k.dataset = d.name AND k.state = 'waiting') AS waiting_candidates,
       (SELECT count(*) FROM gen_quarantine q
         WHERE q.dataset = d.name AND q.state = 'held') AS held,
       (SELECT count(*) FROM gen_backfills b WHERE b.dataset = d.name) AS backfills
FROM gen_datasets d
ORDER BY d.name
