-- The migrators' lock for a connection pooler in transaction mode: held to the end of
-- the one transaction that applies everything (a session lock would be taken on one
-- server connection and "released" on another).
SELECT pg_advisory_xact_lock(hashtextextended('herald.migrate.' || %(schema)s::text, 0))
