INSERT INTO gen_run_partitions (run_id, partition, job_id)
VALUES (%(run_id)s, %(partition)s, %(job_id)s)
