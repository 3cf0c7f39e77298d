-- Link an account; its credentials arrive encrypted already.
INSERT INTO social_accounts (user_id, owner, provider, name, external_id, base_url, options,
                             credentials)
VALUES (%(user_id)s, %(owner)s, %(provider)s, %(name)s, %(external_id)s, %(base_url)s,
        %(options)s::jsonb, %(credentials)s)
RETURNING id, user_id, owner, provider, name, external_id, base_url, options, status,
          status_reason, verified_at, created_at, updated_at, revoked_at
