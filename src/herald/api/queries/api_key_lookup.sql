-- Run for the platform: the key says which tenant the request acts for.
SELECT id, name, scopes, max_active_jobs, tenant_id FROM api_keys
WHERE hash = %(hash)s AND revoked_at IS NULL
