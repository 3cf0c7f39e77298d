SELECT pg_advisory_unlock(hashtextextended('herald.migrate.' || %(schema)s::text, 0))
