-- Serialise slot takers of one key until the end of the transaction. Taken in its own
-- statement so the next statement's snapshot sees every holder committed before us.
SELECT pg_advisory_xact_lock(hashtextextended('herald.concurrency.' || %(key)s, 0))
