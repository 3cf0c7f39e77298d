SELECT k.job_id, k.fingerprint, j.version
FROM idempotency_keys k LEFT JOIN jobs j ON j.id = k.job_id
WHERE k.key = %(key)s AND k.expires_at > herald_now()
