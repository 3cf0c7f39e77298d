-- Partitions of runs that ended without a publication for a reason an operator may act on.
SELECT p.run_id, p.state, p.detail, p.job_id, p.updated_at, r.purpose, r.requested_by
FROM gen_run_partitions p JOIN gen_runs r ON r.id = p.run_id
WHERE r.dataset = %(dataset)s AND p.partition = %(partition)s
  AND p.state IN ('rejected', 'quarantined', 'failed')
ORDER BY p.run_id DESC LIMIT 20
