-- The tenant's jobs waiting or running, and the bytes their payloads take (stored size).
-- Waiting: the tenant's slice of the claim index; running: the lease index (every
-- tenant's running jobs, as many as the workers' slots), filtered. The tenant is a
-- sub-select, a parameter the index condition can take: herald_tenant() inlined is a
-- COALESCE, which row-level security counts as leaky and keeps out of index conditions.
SELECT count(*) AS jobs, coalesce(sum(pg_column_size(payload)), 0)::bigint AS bytes
FROM (
    SELECT payload FROM jobs WHERE tenant_id = (SELECT herald_tenant()) AND state = 'waiting'
    UNION ALL
    SELECT payload FROM jobs WHERE tenant_id = (SELECT herald_tenant()) AND state = 'running'
) AS active
