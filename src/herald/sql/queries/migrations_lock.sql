-- Serialise migrators of one schema across processes and hosts.
SELECT pg_advisory_lock(hashtextextended('herald.migrate.' || current_schema(), 0))
