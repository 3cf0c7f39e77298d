-- The provider's fetch lock, held by the fetching session for the whole fetch: a zombie
-- attempt that still runs keeps a later attempt out. Keyed by schema, tenant and provider.
SELECT pg_try_advisory_lock(hashtextextended('herald.ingest.fetch:' || current_schema() || ':' || herald_tenant() || ':' || %(provider)s, 0)) AS locked
