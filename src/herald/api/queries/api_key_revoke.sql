UPDATE api_keys SET revoked_at = herald_now()
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING id, name, revoked_at
