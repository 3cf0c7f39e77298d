-- What readers of a partition see: the current generation and its publication.
SELECT c.dataset, c.partition, c.generation, c.updated_at, p.publication_id, p.candidate_id,
       p.manifest_ids, p.definition_version, p.run_id, p.quality, p.change, p.published_at,
       k.location, k.checksum, k.row_count
FROM gen_current c
LEFT JOIN gen_publications p ON p.id = c.publication_id
LEFT JOIN gen_candidates k ON k.id = p.candidate_id
WHERE c.dataset = %(dataset)s AND c.partition = %(partition)s
