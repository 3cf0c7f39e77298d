SELECT id, tenant_id, name, scopes, max_active_jobs, created_at, revoked_at FROM api_keys
ORDER BY tenant_id, id
