-- The quotas of the tenant the session acts for (no row: not a tenant).
SELECT id, max_active_jobs, max_per_second, max_payload_bytes
FROM tenants WHERE id = herald_tenant()
