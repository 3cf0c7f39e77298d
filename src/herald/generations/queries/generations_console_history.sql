-- The publications of a partition, newest generation first, with their candidate's bytes.
SELECT p.id, p.publication_id, p.generation, p.change, p.supersedes, p.run_id,
       p.candidate_id, p.definition_version, p.manifest_ids, p.published_by,
       p.published_at, k.checksum, k.row_count, k.job_id, k.attempt, k.fence
FROM gen_publications p JOIN gen_candidates k ON k.id = p.candidate_id
WHERE p.dataset = %(dataset)s AND p.partition = %(partition)s
ORDER BY p.generation DESC
LIMIT %(limit)s
