-- Backfills of a dataset (or of one of its partitions), newest first, with how many of
-- their partitions have settled.
SELECT b.*, count(t.partition) AS total,
       count(t.partition) FILTER (WHERE t.state NOT IN ('queued', 'building')) AS done
FROM gen_backfills b
LEFT JOIN gen_run_partitions t ON t.run_id = b.run_id
WHERE b.dataset = %(dataset)s
  AND (%(partition)s::text IS NULL OR %(partition)s = ANY(b.partitions))
GROUP BY b.id
ORDER BY b.id DESC
LIMIT %(limit)s
