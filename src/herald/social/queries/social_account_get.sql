-- One account with its (encrypted) credentials, for a job or a route that checks it.
SELECT id, user_id, owner, provider, name, external_id, base_url, options, credentials,
       status, status_reason, verified_at, created_at, updated_at, revoked_at,
       verified_at IS NOT NULL
           AND verified_at > herald_now() - make_interval(secs => %(verified_within)s)
           AS recently_verified
FROM social_accounts WHERE id = %(id)s
