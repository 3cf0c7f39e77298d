SELECT id, name, max_active_jobs, max_per_second, max_payload_bytes, created_at
FROM tenants ORDER BY id
