-- Linked accounts, never their credentials; revoked ones only when asked for.
SELECT id, user_id, owner, provider, name, external_id, base_url, options, status,
       status_reason, verified_at, created_at, updated_at, revoked_at
FROM social_accounts
WHERE (%(include_revoked)s::boolean OR status <> 'revoked')
ORDER BY id
LIMIT %(limit)s
