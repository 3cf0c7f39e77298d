-- Fence a staging write: the run is still fetching for this attempt and the attempt
-- still holds its job's lease. The share locks hold off a rescue, a later attempt and
-- any state change of the run until this transaction ends.
SELECT r.id
FROM ingest_runs r JOIN jobs j ON j.id = r.job_id
WHERE r.id = %(run_id)s AND r.state = 'fetching' AND r.job_fence = %(fence)s
  AND j.fence = %(fence)s AND j.state = 'running'
FOR SHARE OF r, j
