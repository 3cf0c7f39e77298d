-- Register a provider or update it; xmax = 0 tells a new row from an updated one. A
-- provider name is its tenant's own: another tenant's provider of that name is another row.
-- The auth header is replaced only when keep_auth is false (an update that does not
-- mention it keeps the stored, encrypted one).
INSERT INTO ingest_providers AS p (
    name, url, format, timezone, connect_timeout, read_timeout, deadline, attempts,
    backoff_base, backoff_cap, max_retry_after, auth_name, auth_cipher
) VALUES (
    %(name)s, %(url)s, %(format)s, %(timezone)s, %(connect_timeout)s, %(read_timeout)s,
    %(deadline)s, %(attempts)s, %(backoff_base)s, %(backoff_cap)s, %(max_retry_after)s,
    %(auth_name)s, %(auth_cipher)s
)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    url = EXCLUDED.url,
    format = EXCLUDED.format,
    timezone = EXCLUDED.timezone,
    connect_timeout = EXCLUDED.connect_timeout,
    read_timeout = EXCLUDED.read_timeout,
    deadline = EXCLUDED.deadline,
    attempts = EXCLUDED.attempts,
    backoff_base = EXCLUDED.backoff_base,
    backoff_cap = EXCLUDED.backoff_cap,
    max_retry_after = EXCLUDED.max_retry_after,
    auth_name = CASE WHEN %(keep_auth)s THEN p.auth_name ELSE EXCLUDED.auth_name END,
    auth_cipher = CASE WHEN %(keep_auth)s THEN p.auth_cipher ELSE EXCLUDED.auth_cipher END,
    updated_at = herald_now()
RETURNING name, url, format, timezone, schedule_id, connect_timeout, read_timeout, deadline,
          attempts, backoff_base, backoff_cap, max_retry_after, auth_name,
          auth_cipher IS NOT NULL AS has_auth, created_at, updated_at, (xmax = 0) AS created
