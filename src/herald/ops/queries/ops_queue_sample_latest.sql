-- Seconds since the latest sample on the database clock (NULL: none yet), so a process
-- that takes the duty over keeps the deployment's cadence instead of sampling at once.
SELECT extract(epoch FROM herald_now() - max(at))::float8 AS age_s FROM queue_samples
