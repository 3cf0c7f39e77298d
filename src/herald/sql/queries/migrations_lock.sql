-- Serialise migrators of one schema across processes and hosts. Keyed by the target
-- schema's name (not current_schema()) so it can be taken before the schema exists.
SELECT pg_advisory_lock(hashtextextended('herald.migrate.' || %(schema)s::text, 0))
