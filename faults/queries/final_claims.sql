SELECT job_id, fence, owner, extract(epoch FROM at)::float8 AS at
FROM fault_claims ORDER BY job_id, fence
