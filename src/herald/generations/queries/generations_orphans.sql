-- Of the given attempt outputs, those no candidate names and whose attempt can never
-- register them: the job is not running under that fence (fences only grow, so it never
-- will be again).
SELECT t.location
FROM unnest(%(locations)s::text[], %(jobs)s::bigint[], %(fences)s::bigint[])
    AS t(location, job_id, fence)
WHERE NOT EXISTS (SELECT 1 FROM gen_candidates c WHERE c.location = t.location)
  AND NOT EXISTS (SELECT 1 FROM jobs j
                  WHERE j.id = t.job_id AND j.fence = t.fence AND j.state = 'running')
