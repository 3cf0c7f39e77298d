SELECT job_id, fence, owner, outcome::text AS outcome, charged,
       extract(epoch FROM at)::float8 AS at
FROM rescues ORDER BY at
