-- Every claim as the database dated it (the claim's own clock reading), one row per
-- (job, fence): the checker dates claims from here, not from a handler's first log line,
-- which a frozen worker writes late.
CREATE TABLE IF NOT EXISTS fault_claims (
    job_id  bigint      NOT NULL,
    fence   bigint      NOT NULL,
    owner   text        NOT NULL,
    at      timestamptz NOT NULL,
    PRIMARY KEY (job_id, fence)
)
