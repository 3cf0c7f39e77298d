-- The credentials worked just now: later posts within the trust window skip the call.
UPDATE social_accounts SET verified_at = herald_now()
WHERE id = %(id)s AND status = 'active'
