SELECT schedule_id, extract(epoch FROM slot)::float8 AS slot, job_id, outcome
FROM schedule_fires ORDER BY schedule_id, slot
