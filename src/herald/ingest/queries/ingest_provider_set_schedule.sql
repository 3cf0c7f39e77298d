UPDATE ingest_providers SET schedule_id = %(schedule_id)s, updated_at = herald_now()
WHERE name = %(name)s
RETURNING schedule_id
