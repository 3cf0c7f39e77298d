-- Move an account between active, needs_reauth and revoking (never out of revoked).
UPDATE social_accounts
SET status = %(status)s, status_reason = %(reason)s, updated_at = herald_now()
WHERE id = %(id)s AND status = ANY(%(allowed)s::text[])
RETURNING id, status, status_reason
