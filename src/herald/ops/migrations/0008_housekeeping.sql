-- Released with the catalog's `columns` column too, now the catalog's 0013 (the
-- ledger of a database that applied the whole file accepts this part: see herald.migrate).
--
-- Housekeeping duties (maintenance, dead-letter cleanup, an application's own sweeps),
-- each run by one process of the deployment at a time: the holder keeps its row's lease
-- (database time) renewed; once it lapses (holder dead or hung) another process takes it.
CREATE TABLE duties (
    name        text        PRIMARY KEY CHECK (name <> '' AND length(name) <= 200),
    holder      text        NOT NULL CHECK (holder <> '' AND length(holder) <= 300),
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT herald_now()
);
