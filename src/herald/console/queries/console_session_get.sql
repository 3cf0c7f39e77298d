-- A live session and the key it acts for: expired sessions and revoked keys find nothing.
-- Run for the platform: the session is found by its secret, the key says its tenant.
-- The database's clock comes along: every age the page shows is measured by it.
SELECT s.token_hash, s.api_key_id, s.anonymous, s.csrf_token, s.flash, s.expires_at,
       k.name AS key_name, k.scopes, k.max_active_jobs, k.tenant_id, herald_now() AS now
FROM console_sessions s
LEFT JOIN api_keys k ON k.id = s.api_key_id
WHERE s.token_hash = %(token_hash)s
  AND s.expires_at > herald_now()
  AND (s.anonymous OR k.revoked_at IS NULL)
