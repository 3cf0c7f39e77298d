SELECT queue,
       count(*) FILTER (WHERE state = 'waiting' AND run_at <= herald_now()) AS available,
       count(*) FILTER (WHERE state = 'waiting' AND run_at > herald_now()) AS scheduled,
       count(*) FILTER (WHERE state = 'running') AS running,
       extract(epoch FROM herald_now() - min(run_at) FILTER (
           WHERE state = 'waiting' AND run_at <= herald_now()))::float8 AS oldest_waiting_s
FROM jobs
WHERE state IN ('waiting', 'running')
GROUP BY queue ORDER BY queue
