SELECT id, key, extract(epoch FROM next_due_at)::float8 AS next_due, fired_count
FROM schedules ORDER BY id
