-- The tenant's jobs waiting or running, and the bytes their payloads take (stored size).
SELECT count(*) AS jobs, coalesce(sum(pg_column_size(payload)), 0)::bigint AS bytes
FROM jobs
WHERE tenant_id = herald_tenant() AND state IN ('waiting', 'running')
