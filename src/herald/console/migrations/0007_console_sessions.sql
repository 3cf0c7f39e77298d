-- Operator console: signed-in browser sessions. The cookie carries a random token of
-- which only the SHA-256 is stored here. A session acts with its API key's scopes, read
-- on every request, so revoking the key ends its sessions at once; signing out deletes
-- the row. The CSRF token is bound to the session: a form from another session fails.

CREATE TABLE console_sessions (
    token_hash  text        PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    api_key_id  bigint      REFERENCES api_keys (id) ON DELETE CASCADE,
    -- only a console serving without authentication (a local demo) signs in anonymously.
    anonymous   boolean     NOT NULL DEFAULT false,
    csrf_token  text        NOT NULL CHECK (length(csrf_token) >= 32),
    -- the outcome of the last action, shown once on the next page.
    flash       jsonb       CHECK (flash IS NULL OR jsonb_typeof(flash) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT herald_now(),
    expires_at  timestamptz NOT NULL,
    CONSTRAINT console_session_identity CHECK (anonymous = (api_key_id IS NULL)),
    CONSTRAINT console_session_expiry CHECK (expires_at > created_at)
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
CREATE INDEX console_sessions_key ON console_sessions (api_key_id) WHERE api_key_id IS NOT NULL;
