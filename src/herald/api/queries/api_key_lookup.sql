SELECT id, name, scopes, max_active_jobs FROM api_keys
WHERE hash = %(hash)s AND revoked_at IS NULL
