SELECT job_id, attempt, reason FROM dead_letters ORDER BY job_id
