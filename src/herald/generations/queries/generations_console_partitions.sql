-- Every partition of a dataset that has a pointer, a task or an input, with its current
-- generation and what is pending on it; late: accepted inputs the current generation
-- does not include.
WITH known AS (
    SELECT partition FROM gen_current WHERE dataset = %(dataset)s
    UNION SELECT p.partition FROM gen_run_partitions p JOIN gen_runs r ON r.id = p.run_id
          WHERE r.dataset = %(dataset)s
    UNION SELECT unnest(partitions) FROM gen_input_manifests WHERE dataset = %(dataset)s
)
SELECT k.partition,
       coalesce(c.generation, 0) AS generation,
       p.published_at, p.change, p.definition_version,
       (SELECT count(*) FROM gen_run_partitions t JOIN gen_runs r ON r.id = t.run_id
         WHERE r.dataset = %(dataset)s AND t.partition = k.partition
           AND t.state IN ('queued', 'building')) AS running_tasks,
       (SELECT count(*) FROM gen_candidates w
         WHERE w.dataset = %(dataset)s AND w.partition = k.partition
           AND w.state = 'waiting') AS waiting_candidates,
       (SELECT count(*) FROM gen_run_partitions t JOIN gen_runs r ON r.id = t.run_id
         WHERE r.dataset = %(dataset)s AND t.partition = k.partition
           AND t.state IN ('rejected', 'quarantined', 'failed')) AS failures,
       (SELECT count(*) FROM gen_quarantine q
         WHERE q.dataset = %(dataset)s AND q.partition = k.partition
           AND q.state = 'held') AS held,
       (SELECT count(*) FROM gen_input_manifests m
         WHERE m.dataset = %(dataset)s AND k.partition = ANY(m.partitions)
           AND NOT m.id = ANY(coalesce(p.manifest_ids, '{}'))) AS late_inputs
FROM known k
LEFT JOIN gen_current c ON c.dataset = %(dataset)s AND c.partition = k.partition
LEFT JOIN gen_publications p ON p.id = c.publication_id
ORDER BY k.partition DESC
LIMIT %(limit)s
