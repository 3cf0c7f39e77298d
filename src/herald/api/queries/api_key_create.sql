-- The key belongs to the tenant the session acts for.
INSERT INTO api_keys (name, hash, scopes, max_active_jobs)
VALUES (%(name)s, %(hash)s, %(scopes)s::text[], %(max_active_jobs)s)
RETURNING id, tenant_id, name, scopes, max_active_jobs, created_at
