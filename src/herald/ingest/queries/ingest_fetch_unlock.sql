SELECT pg_advisory_unlock(hashtextextended('herald.ingest.fetch:' || current_schema() || ':' || %(provider)s, 0)) AS unlocked
