-- The encrypted auth header, for the fetch job alone.
SELECT auth_name, auth_cipher FROM ingest_providers WHERE name = %(name)s
