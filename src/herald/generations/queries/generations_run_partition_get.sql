SELECT p.*, r.dataset FROM gen_run_partitions p JOIN gen_runs r ON r.id = p.run_id
WHERE p.run_id = %(run_id)s AND p.partition = %(partition)s
