-- The session's buffer a batch is copied into: COPY FROM is refused on a table under
-- row-level security (ingest_staged is), so the rows go through this temporary table
-- of the same columns (no policy: it is the session's own), emptied at every commit,
-- and into ingest_staged by one INSERT (ingest_stage_flush), which the policy checks.
-- Created once per session.
CREATE TEMPORARY TABLE IF NOT EXISTS ingest_stage_buffer
    (LIKE ingest_staged INCLUDING DEFAULTS INCLUDING IDENTITY) ON COMMIT DELETE ROWS
