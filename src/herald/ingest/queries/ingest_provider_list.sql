-- Every provider with its latest run (the auth value is never selected).
SELECT p.name, p.url, p.format, p.timezone, p.schedule_id, p.connect_timeout, p.read_timeout,
       p.deadline, p.attempts, p.backoff_base, p.backoff_cap, p.max_retry_after, p.auth_name,
       p.auth_cipher IS NOT NULL AS has_auth, p.created_at, p.updated_at,
       r.id AS last_run_id, r.state AS last_run_state
FROM ingest_providers p
LEFT JOIN LATERAL (
    SELECT id, state FROM ingest_runs WHERE provider = p.name ORDER BY id DESC LIMIT 1
) r ON true
ORDER BY p.name
