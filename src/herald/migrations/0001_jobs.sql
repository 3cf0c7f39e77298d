-- Herald engine core: jobs under fenced leases.
-- Objects are created unqualified: the connection's search_path names the schema,
-- so one database can hold several isolated Herald schemas (tests, tenants).

-- The engine's clock. Every timestamp comparison goes through it so tests can shift
-- time for a session (SET herald.clock_offset = '3 days') without touching the host.
CREATE FUNCTION herald_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT now() + coalesce(nullif(current_setting('herald.clock_offset', true), ''), '0')::interval
$$;

CREATE TYPE job_state AS ENUM ('waiting', 'running', 'succeeded', 'dead', 'cancelled');

CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind <> '' AND length(kind) <= 200),
    queue            text        NOT NULL DEFAULT 'default' CHECK (queue <> '' AND length(queue) <= 200),
    key              text        CHECK (key <> '' AND length(key) <= 1000),
    version          integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    payload          jsonb       NOT NULL DEFAULT '{}',
    priority         smallint    NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT herald_now(),
    state            job_state   NOT NULL DEFAULT 'waiting',
    step             text,
    checkpoint       jsonb,
    result           jsonb,
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 1000),
    lease_owner      text,
    lease_expires_at timestamptz,
    fence            bigint      NOT NULL DEFAULT 0 CHECK (fence >= 0),
    idempotency_key  text,
    errors           jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    snoozes          integer     NOT NULL DEFAULT 0 CHECK (snoozes >= 0),
    rescues          integer     NOT NULL DEFAULT 0 CHECK (rescues >= 0),
    replay_of        bigint,
    created_at       timestamptz NOT NULL DEFAULT herald_now(),
    attempted_at     timestamptz,
    finished_at      timestamptz,

    -- attempts are bounded: a claim past max_attempts is rejected by the database.
    CONSTRAINT attempt_bounded CHECK (attempt BETWEEN 0 AND max_attempts),
    -- running <=> under a lease; nothing else holds one.
    CONSTRAINT lease_iff_running CHECK (
        (state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
        AND (lease_owner IS NULL) = (lease_expires_at IS NULL)
    ),
    -- a running job has been claimed at least once (attempt and fence moved).
    CONSTRAINT running_was_claimed CHECK (state <> 'running' OR (attempt >= 1 AND fence >= 1)),
    -- finished_at is set exactly for the terminal states.
    CONSTRAINT finished_iff_terminal CHECK (
        (state IN ('succeeded', 'dead', 'cancelled')) = (finished_at IS NOT NULL)
    ),
    CONSTRAINT payload_is_object CHECK (jsonb_typeof(payload) = 'object')
) WITH (
    -- a queue table churns: vacuum early and often so dead tuples never pile up,
    -- and leave room on pages for HOT updates of lease columns.
    fillfactor = 85,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1
);

-- One active job per (kind, key): the database rejects a second concurrent attempt.
CREATE UNIQUE INDEX jobs_one_active_per_key ON jobs (kind, key)
    WHERE key IS NOT NULL AND state IN ('waiting', 'running');
-- A version number is never given twice for the same object.
CREATE UNIQUE INDEX jobs_version_per_key ON jobs (kind, key, version) WHERE key IS NOT NULL;
-- Claim order.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id) WHERE state = 'waiting';
-- Rescue scan.
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running';
-- Prune scan.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_kind_state ON jobs (kind, state);

-- Version counter per object. It outlives pruned job rows so numbers are never reused.
CREATE TABLE key_versions (
    kind         text    NOT NULL,
    key          text    NOT NULL,
    last_version integer NOT NULL CHECK (last_version >= 1),
    PRIMARY KEY (kind, key)
);

-- Idempotency keys: the same key within its retention returns the original job.
CREATE TABLE idempotency_keys (
    key         text        PRIMARY KEY CHECK (key <> '' AND length(key) <= 255),
    job_id      bigint      NOT NULL,
    fingerprint text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT herald_now(),
    expires_at  timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Dead letters: written in the same statement that makes a job dead.
CREATE TABLE dead_letters (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       bigint      NOT NULL UNIQUE,
    kind         text        NOT NULL,
    queue        text        NOT NULL,
    key          text,
    version      integer     NOT NULL,
    payload      jsonb       NOT NULL,
    attempt      integer     NOT NULL,
    step         text,
    -- what the failed attempt produced and may need cleaning up (its checkpoint).
    cleanup      jsonb,
    errors       jsonb       NOT NULL,
    reason       text        NOT NULL CHECK (reason IN ('permanent', 'exhausted', 'lease_exhausted')),
    created_at   timestamptz NOT NULL DEFAULT herald_now()
);
CREATE INDEX dead_letters_kind ON dead_letters (kind, created_at);

-- Every fenced write that lost its fence is recorded here: it changed nothing else.
CREATE TABLE stale_writes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint      NOT NULL,
    fence       bigint      NOT NULL,
    operation   text        NOT NULL,
    owner       text,
    at          timestamptz NOT NULL DEFAULT herald_now()
);
CREATE INDEX stale_writes_job ON stale_writes (job_id);

-- Rescues (lease expiries) are counted apart from handler errors.
CREATE TABLE rescues (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint      NOT NULL,
    fence       bigint      NOT NULL,
    owner       text        NOT NULL,
    outcome     job_state   NOT NULL CHECK (outcome IN ('waiting', 'dead')),
    at          timestamptz NOT NULL DEFAULT herald_now()
);
CREATE INDEX rescues_job ON rescues (job_id);
