-- Housekeeping duties (maintenance, dead-letter cleanup, an application's own sweeps),
-- each run by one process of the deployment at a time: the holder keeps its row's lease
-- (database time) renewed; once it lapses (holder dead or hung) another process takes it.
CREATE TABLE duties (
    name        text        PRIMARY KEY CHECK (name <> '' AND length(name) <= 200),
    holder      text        NOT NULL CHECK (holder <> '' AND length(holder) <= 300),
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT herald_now()
);

-- The columns a version exported, each with its name in the XML file where that differs
-- (XML names are mapped from the source's column names): [{"name": ..., "xml_name": ...}].
ALTER TABLE dataset_versions ADD COLUMN columns jsonb CHECK (jsonb_typeof(columns) = 'array');
