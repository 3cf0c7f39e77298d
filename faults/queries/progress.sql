SELECT count(*) FILTER (WHERE state IN ('succeeded', 'dead', 'cancelled')) AS done,
       count(*) AS total
FROM jobs
