INSERT INTO gen_publications (dataset, partition, generation, candidate_id, run_id,
                              manifest_ids, definition_version, quality, change, supersedes,
                              published_by)
VALUES (%(dataset)s, %(partition)s, %(generation)s, %(candidate_id)s, %(run_id)s,
        %(manifest_ids)s, %(definition_version)s, %(quality)s, %(change)s, %(supersedes)s,
        %(published_by)s)
RETURNING *
