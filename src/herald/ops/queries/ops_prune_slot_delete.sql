-- Delete the free slots of keys whose takers' lock we hold: no taker can write them
-- meanwhile, and a slot row that is absent is as free as one whose holder is gone.
DELETE FROM concurrency_slots s
WHERE s.key = ANY(%(keys)s::text[])
  AND NOT EXISTS (
      SELECT 1 FROM jobs j WHERE j.id = s.job_id AND j.fence = s.fence AND j.state = 'running'
  )
