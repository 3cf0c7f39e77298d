SELECT pg_advisory_unlock(hashtextextended('herald.ingest.fetch:' || current_schema() || ':' || herald_tenant() || ':' || %(provider)s, 0)) AS unlocked
