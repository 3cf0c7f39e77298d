-- Register one attempt's output. The table's trigger refuses it unless (job, fence) is
-- the job's current fence and the job is running: a zombie attempt registers nothing.
INSERT INTO gen_candidates (run_id, dataset, partition, job_id, attempt, fence, worker,
                            location, checksum, row_count, schema_version, quality, lineage)
VALUES (%(run_id)s, %(dataset)s, %(partition)s, %(job_id)s, %(attempt)s, %(fence)s,
        %(worker)s, %(location)s, %(checksum)s, %(row_count)s, %(schema_version)s,
        %(quality)s, %(lineage)s)
RETURNING *
