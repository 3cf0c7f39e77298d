-- The effect: written in the same transaction as the job's fenced completion.
-- Deliberately no unique constraint: the checker must be able to see a duplicate.
CREATE TABLE IF NOT EXISTS fault_effects (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   bigint      NOT NULL,
    attempt  integer     NOT NULL,
    fence    bigint      NOT NULL,
    worker   text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
)
