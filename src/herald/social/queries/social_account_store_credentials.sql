-- Store renewed credentials (a refreshed session), never on a revoked account.
UPDATE social_accounts SET credentials = %(credentials)s, updated_at = herald_now()
WHERE id = %(id)s AND status IN ('active', 'needs_reauth', 'revoking')
RETURNING id
