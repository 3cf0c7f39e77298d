-- The generations an input went into, and every run that declared it (lineage backwards).
SELECT 'generation' AS kind, p.partition, p.generation, p.published_at AS at,
       p.run_id, NULL::text AS state
FROM gen_publications p
WHERE p.dataset = %(dataset)s AND %(id)s::bigint = ANY(p.manifest_ids)
UNION ALL
SELECT 'run', t.partition, NULL, r.created_at, r.id, t.state
FROM gen_runs r JOIN gen_run_partitions t ON t.run_id = r.id
WHERE r.dataset = %(dataset)s AND %(id)s::bigint = ANY(r.manifest_ids)
ORDER BY kind, at DESC
LIMIT 200
