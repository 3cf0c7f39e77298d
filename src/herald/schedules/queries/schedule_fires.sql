SELECT id, schedule_id, slot, fired_at, job_id, outcome, coalesced
FROM schedule_fires
WHERE schedule_id = %(schedule_id)s
ORDER BY slot DESC
LIMIT %(limit)s
