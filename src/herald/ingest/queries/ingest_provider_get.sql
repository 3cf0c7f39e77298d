-- One provider as shown to operators: the auth value is never selected, only whether one is set.
SELECT name, url, format, timezone, schedule_id, connect_timeout, read_timeout, deadline,
       attempts, backoff_base, backoff_cap, max_retry_after, auth_name,
       auth_cipher IS NOT NULL AS has_auth, created_at, updated_at
FROM ingest_providers WHERE name = %(name)s
