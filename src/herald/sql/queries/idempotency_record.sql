INSERT INTO idempotency_keys (key, job_id, fingerprint, created_at, expires_at)
VALUES (%(key)s, %(job_id)s, %(fingerprint)s, herald_now(),
        herald_now() + make_interval(secs => %(retention_s)s))
ON CONFLICT (tenant_id, key) DO UPDATE
SET job_id = excluded.job_id, fingerprint = excluded.fingerprint,
    created_at = excluded.created_at, expires_at = excluded.expires_at
