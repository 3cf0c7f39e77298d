-- Operating the engine: audit trail, cleanup of failed attempts, rate and concurrency limits.

-- Every manual action: who, what, why, when, and the target before and after.
CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT herald_now(),
    actor       text        NOT NULL CHECK (btrim(actor) <> '' AND length(actor) <= 200),
    action      text        NOT NULL CHECK (btrim(action) <> '' AND length(action) <= 100),
    target_type text        NOT NULL CHECK (btrim(target_type) <> '' AND length(target_type) <= 100),
    target_id   text        NOT NULL CHECK (target_id <> '' AND length(target_id) <= 1000),
    reason      text        NOT NULL CHECK (btrim(reason) <> '' AND length(reason) <= 2000),
    before      jsonb,
    after       jsonb
);
CREATE INDEX audit_log_target ON audit_log (target_type, target_id, id);
CREATE INDEX audit_log_at ON audit_log (at);

-- Failure log: each dead letter carries the state of its compensation.
-- pending -> the cleanup runner still owes the kind's hook a successful call;
-- done -> the hook succeeded; not_needed -> the kind declares no hook.
ALTER TABLE dead_letters
    ADD COLUMN cleanup_state      text        NOT NULL DEFAULT 'pending'
        CHECK (cleanup_state IN ('pending', 'done', 'not_needed')),
    ADD COLUMN cleanup_attempts   integer     NOT NULL DEFAULT 0 CHECK (cleanup_attempts >= 0),
    ADD COLUMN cleanup_last_error text,
    ADD COLUMN cleanup_next_at    timestamptz NOT NULL DEFAULT herald_now(),
    ADD COLUMN cleanup_done_at    timestamptz,
    -- the newest job created by replaying this dead letter, if any.
    ADD COLUMN replayed_job_id    bigint,
    ADD CONSTRAINT cleanup_done_iff_settled
        CHECK ((cleanup_state = 'pending') = (cleanup_done_at IS NULL));
CREATE INDEX dead_letters_cleanup_due ON dead_letters (cleanup_next_at)
    WHERE cleanup_state = 'pending';

-- Token buckets shared by every worker. tokens is the level at updated_at; refills
-- are computed on demand. last_wait is the decision of the latest request (0 = token
-- granted), so one upsert can both decide and report.
CREATE TABLE rate_limits (
    key        text             PRIMARY KEY CHECK (key <> '' AND length(key) <= 1000),
    rate       double precision NOT NULL CHECK (rate > 0),
    burst      double precision NOT NULL CHECK (burst >= 1),
    tokens     double precision NOT NULL CHECK (tokens >= 0),
    updated_at timestamptz      NOT NULL DEFAULT herald_now(),
    last_wait  double precision NOT NULL DEFAULT 0 CHECK (last_wait >= 0),
    granted    bigint           NOT NULL DEFAULT 0 CHECK (granted >= 0),
    denied     bigint           NOT NULL DEFAULT 0 CHECK (denied >= 0),
    CHECK (tokens <= burst)
);

-- Concurrency slots: at most K per key. A slot is held while its job is running under
-- the fence that took it, so a finished, snoozed or rescued job frees it by itself.
CREATE TABLE concurrency_slots (
    key         text        NOT NULL CHECK (key <> '' AND length(key) <= 1000),
    slot        integer     NOT NULL CHECK (slot >= 0),
    job_id      bigint      NOT NULL,
    fence       bigint      NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT herald_now(),
    PRIMARY KEY (key, slot)
);
CREATE INDEX concurrency_slots_job ON concurrency_slots (job_id);
