-- The unfenced log: every handler run appends here on its own connection, whatever
-- becomes of its lease. It is the checker's record of what really executed.
CREATE TABLE IF NOT EXISTS fault_executions (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           bigint      NOT NULL,
    attempt          integer     NOT NULL,
    fence            bigint      NOT NULL,
    step             text,
    worker           text        NOT NULL,
    pid              integer     NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at         timestamptz,
    outcome          text,
    -- the lease expiry seen at the end of the run, while this fence was still current
    lease_seen_until timestamptz
)
