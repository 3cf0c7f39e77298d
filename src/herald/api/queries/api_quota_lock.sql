-- Held to the end of the admission's transaction: one key's admissions count in turn.
SELECT pg_advisory_xact_lock(hashtextextended('herald.api.quota.' || %(key_id)s::text, 0))
