-- Held to the end of the admission's transaction: one tenant's quota checks take turns.
SELECT pg_advisory_xact_lock(hashtextextended('herald.tenant.quota.' || herald_tenant(), 0))
