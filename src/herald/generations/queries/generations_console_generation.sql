-- One generation of a partition: its publication, the candidate that became it, the run
-- that produced that candidate, and whether it is what readers see now.
SELECT p.id, p.publication_id, p.dataset, p.partition, p.generation, p.change,
       p.supersedes, p.run_id, p.candidate_id, p.manifest_ids, p.definition_version,
       p.quality, p.published_by, p.published_at,
       k.location, k.checksum, k.row_count, k.schema_version, k.job_id, k.attempt,
       k.fence, k.worker, k.lineage, k.registered_at,
       r.purpose, r.policy, r.intent, r.requested_by, r.reason AS run_reason,
       r.base_generations ->> p.partition AS base_generation, r.backfill_id,
       (c.publication_id = p.id) AS is_current
FROM gen_publications p
JOIN gen_candidates k ON k.id = p.candidate_id
JOIN gen_runs r ON r.id = p.run_id
LEFT JOIN gen_current c ON c.dataset = p.dataset AND c.partition = p.partition
WHERE p.dataset = %(dataset)s AND p.partition = %(partition)s
  AND p.generation = %(generation)s
