SELECT job_id, attempt, fence, worker, extract(epoch FROM at)::float8 AS at
FROM fault_effects ORDER BY job_id, id
