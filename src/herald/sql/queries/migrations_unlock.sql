SELECT pg_advisory_unlock(hashtextextended('herald.migrate.' || current_schema(), 0))
