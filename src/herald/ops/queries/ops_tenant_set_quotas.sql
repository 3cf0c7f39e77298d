-- Replace a tenant's quotas (NULL: unlimited); returns the tenant as it was before.
UPDATE tenants t
SET max_active_jobs = %(max_active_jobs)s, max_per_second = %(max_per_second)s,
    max_payload_bytes = %(max_payload_bytes)s
FROM tenants old
WHERE t.id = %(id)s AND old.id = t.id
RETURNING old.id, old.name, old.max_active_jobs, old.max_per_second, old.max_payload_bytes
