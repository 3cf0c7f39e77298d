-- The late-partition demo starts from an empty schema of its own.
DROP SCHEMA IF EXISTS {schema} CASCADE
