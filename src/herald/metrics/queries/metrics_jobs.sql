-- Retained jobs by kind and state, with the retries and snoozes they went through.
SELECT kind, state::text AS state, count(*) AS n,
       coalesce(sum(greatest(attempt - 1, 0)), 0) AS retries,
       coalesce(sum(snoozes), 0) AS snoozes
FROM jobs GROUP BY kind, state ORDER BY kind, state
