-- Disconnected for good: the credentials are wiped in the same statement.
UPDATE social_accounts
SET status = 'revoked', credentials = NULL, revoked_at = herald_now(),
    status_reason = %(reason)s, updated_at = herald_now()
WHERE id = %(id)s AND status <> 'revoked'
RETURNING id, status, status_reason, revoked_at
