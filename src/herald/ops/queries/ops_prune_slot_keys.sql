-- Keys holding concurrency slots that are free already: the attempt that took each one
-- no longer runs under that fence (it finished, snoozed, was cancelled or rescued).
-- A fence only grows, so a free slot never becomes held again except by a new taker.
SELECT DISTINCT s.key
FROM concurrency_slots s
WHERE NOT EXISTS (
    SELECT 1 FROM jobs j WHERE j.id = s.job_id AND j.fence = s.fence AND j.state = 'running'
)
LIMIT %(limit)s
