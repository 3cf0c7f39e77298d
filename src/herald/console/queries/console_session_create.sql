-- A new console session for an API key (or an anonymous one when authentication is off).
INSERT INTO console_sessions (token_hash, api_key_id, anonymous, csrf_token, expires_at)
VALUES (%(token_hash)s, %(api_key_id)s, %(api_key_id)s::bigint IS NULL, %(csrf_token)s,
        herald_now() + make_interval(secs => %(lifetime_s)s))
RETURNING token_hash, expires_at
