INSERT INTO tenants (id, name, max_active_jobs, max_per_second, max_payload_bytes)
VALUES (%(id)s, %(name)s, %(max_active_jobs)s, %(max_per_second)s, %(max_payload_bytes)s)
ON CONFLICT (id) DO NOTHING
RETURNING id, name, max_active_jobs, max_per_second, max_payload_bytes, created_at
