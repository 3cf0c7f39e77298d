SELECT id, kind, state::text AS state, attempt, max_attempts, fence, rescues,
       (payload ? 'poison') AS poison,
       (state = 'running' AND lease_expires_at > herald_now()) AS leased,
       extract(epoch FROM created_at)::float8 AS created,
       extract(epoch FROM finished_at)::float8 AS finished
FROM jobs ORDER BY id
