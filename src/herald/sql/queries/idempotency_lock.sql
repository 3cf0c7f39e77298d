-- Held to the end of the transaction: admissions with the same idempotency key queue up.
SELECT pg_advisory_xact_lock(hashtextextended('herald.idem.' || %(key)s, 0))
