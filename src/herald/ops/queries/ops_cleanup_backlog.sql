-- Cleanup backlog for operators and metrics.
SELECT count(*) FILTER (WHERE cleanup_state = 'pending') AS pending,
       count(*) FILTER (WHERE cleanup_state = 'pending' AND cleanup_attempts > 0) AS failing,
       extract(epoch FROM herald_now() - min(created_at) FILTER (
           WHERE cleanup_state = 'pending'))::float8 AS oldest_pending_s
FROM dead_letters
