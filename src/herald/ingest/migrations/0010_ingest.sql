-- Snapshot ingestion: providers, ingestion runs, staged rows, canonical plans, quarantine.
-- The state machines live here as CHECK constraints and partial unique indexes:
--   run:        fetching -> staged | failed;  staged -> processed
--   staged row: pending -> processing -> done | failed  (processing -> pending on retry
--               or requeue); claimable only while pending, with attempts left, in a
--               staged run (see ingest_claim.sql).

CREATE TABLE ingest_providers (
    name             text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    url              text        NOT NULL CHECK (url ~ '^https?://[^\s]+$' AND length(url) <= 2000),
    format           text        NOT NULL CHECK (format <> '' AND length(format) <= 100),
    timezone         text        NOT NULL DEFAULT 'UTC' CHECK (timezone <> '' AND length(timezone) <= 100),
    schedule_id      bigint      REFERENCES schedules (id) ON DELETE SET NULL,
    connect_timeout  double precision NOT NULL DEFAULT 10 CHECK (connect_timeout > 0),
    read_timeout     double precision NOT NULL DEFAULT 30 CHECK (read_timeout > 0),
    deadline         double precision NOT NULL DEFAULT 1800 CHECK (deadline > 0),
    attempts         integer     NOT NULL DEFAULT 4 CHECK (attempts BETWEEN 1 AND 20),
    backoff_base     double precision NOT NULL DEFAULT 1 CHECK (backoff_base > 0),
    backoff_cap      double precision NOT NULL DEFAULT 60 CHECK (backoff_cap >= backoff_base),
    max_retry_after  double precision NOT NULL DEFAULT 300 CHECK (max_retry_after >= 0),
    -- The auth header's value is stored encrypted (never in clear, never selected by the
    -- listing statements); its name is not a secret.
    auth_name        text        CHECK (auth_name ~ '^[!-9;-~]{1,100}$'),
    auth_cipher      text        CHECK (length(auth_cipher) <= 10000),
    created_at       timestamptz NOT NULL DEFAULT herald_now(),
    updated_at       timestamptz NOT NULL DEFAULT herald_now(),
    CONSTRAINT provider_auth_whole CHECK ((auth_name IS NULL) = (auth_cipher IS NULL))
);

CREATE TABLE ingest_runs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider      text        NOT NULL REFERENCES ingest_providers (name) ON DELETE CASCADE,
    state         text        NOT NULL DEFAULT 'fetching'
                              CHECK (state IN ('fetching', 'staged', 'failed', 'processed')),
    -- The fetch attempt that owns the run while it is fetching: its rows are written
    -- only while that job still holds this fence.
    job_id        bigint      NOT NULL,
    job_fence     bigint      NOT NULL CHECK (job_fence >= 1),
    -- The snapshot's time: canonical plans keep the newest snapshot that showed them.
    snapshot_at   timestamptz NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT herald_now(),
    staged_at     timestamptz,
    finished_at   timestamptz,
    rows_staged   bigint      NOT NULL DEFAULT 0 CHECK (rows_staged >= 0),
    rejected      bigint      NOT NULL DEFAULT 0 CHECK (rejected >= 0),
    rows_done     bigint      NOT NULL DEFAULT 0 CHECK (rows_done >= 0),
    rows_failed   bigint      NOT NULL DEFAULT 0 CHECK (rows_failed >= 0),
    bytes         bigint      NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    http_attempts integer     NOT NULL DEFAULT 0 CHECK (http_attempts >= 0),
    error         text        CHECK (length(error) <= 4000),
    -- staged_at is set exactly once the snapshot arrived whole.
    CONSTRAINT run_staged_iff_complete CHECK ((state IN ('staged', 'processed')) = (staged_at IS NOT NULL)),
    -- a run is finished (failed or processed) exactly when finished_at is set.
    CONSTRAINT run_finished_iff_terminal CHECK ((state IN ('failed', 'processed')) = (finished_at IS NOT NULL)),
    -- a failed run says why; no other run carries an error.
    CONSTRAINT run_failed_iff_error CHECK ((state = 'failed') = (error IS NOT NULL))
);
-- One fetch per provider at a time: a second fetching run is refused by the database.
CREATE UNIQUE INDEX ingest_runs_one_fetching ON ingest_runs (provider) WHERE state = 'fetching';
CREATE INDEX ingest_runs_provider ON ingest_runs (provider, id DESC);
CREATE INDEX ingest_runs_staged ON ingest_runs (id) WHERE state = 'staged';

CREATE TABLE ingest_staged (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        bigint      NOT NULL REFERENCES ingest_runs (id) ON DELETE CASCADE,
    state         text        NOT NULL DEFAULT 'pending'
                              CHECK (state IN ('pending', 'processing', 'done', 'failed')),
    attempts      integer     NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100),
    claimed_at    timestamptz,
    claimed_by    text,
    last_error    text        CHECK (length(last_error) <= 2000),
    base_plan_id  text        NOT NULL,
    plan_id       text        NOT NULL,
    title         text        NOT NULL,
    starts_at     timestamptz NOT NULL,
    ends_at       timestamptz NOT NULL,
    sell_mode     text        NOT NULL,
    online        boolean     NOT NULL,
    min_price     numeric,
    max_price     numeric,
    zones         jsonb       NOT NULL,
    CONSTRAINT staged_attempts_bounded CHECK (attempts BETWEEN 0 AND max_attempts),
    -- a row is claimed exactly while it is processing; claimed_by keeps the last
    -- claimer's token (on a done row: who processed it).
    CONSTRAINT staged_claimed_iff_processing CHECK (
        (state = 'processing') = (claimed_at IS NOT NULL)
        AND (claimed_at IS NULL OR claimed_by IS NOT NULL)
    ),
    -- a failed row says why.
    CONSTRAINT staged_failed_has_error CHECK (state <> 'failed' OR last_error IS NOT NULL)
) WITH (
    fillfactor = 90,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
-- Claim order within a run; only claimable candidates are indexed.
CREATE INDEX ingest_staged_pending ON ingest_staged (run_id, id) WHERE state = 'pending';
-- Requeue scan of rows stuck in processing.
CREATE INDEX ingest_staged_processing ON ingest_staged (claimed_at) WHERE state = 'processing';
CREATE INDEX ingest_staged_run_state ON ingest_staged (run_id, state);

CREATE TABLE ingest_plans (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider      text        NOT NULL REFERENCES ingest_providers (name) ON DELETE CASCADE,
    base_plan_id  text        NOT NULL CHECK (base_plan_id <> '' AND length(base_plan_id) <= 128),
    plan_id       text        NOT NULL CHECK (plan_id <> '' AND length(plan_id) <= 128),
    title         text        NOT NULL CHECK (title <> '' AND length(title) <= 1000),
    starts_at     timestamptz NOT NULL,
    ends_at       timestamptz NOT NULL,
    sell_mode     text        NOT NULL CHECK (sell_mode <> '' AND length(sell_mode) <= 32),
    ever_online   boolean     NOT NULL,
    min_price     numeric     CHECK (min_price >= 0),
    max_price     numeric     CHECK (max_price >= min_price),
    zones         jsonb       NOT NULL CHECK (jsonb_typeof(zones) = 'array'),
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    CONSTRAINT plan_dates_ordered CHECK (ends_at >= starts_at),
    CONSTRAINT plan_seen_ordered CHECK (last_seen_at >= first_seen_at),
    CONSTRAINT plan_prices_together CHECK ((min_price IS NULL) = (max_price IS NULL)),
    CONSTRAINT plan_identity UNIQUE (provider, base_plan_id, plan_id)
);
-- The search path: ever-online plans by start, id as the cursor's tie-breaker.
CREATE INDEX ingest_plans_search ON ingest_plans (starts_at, id) INCLUDE (ends_at) WHERE ever_online;

CREATE TABLE ingest_quarantine (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      bigint      NOT NULL REFERENCES ingest_runs (id) ON DELETE CASCADE,
    provider    text        NOT NULL,
    reason      text        NOT NULL CHECK (reason <> '' AND length(reason) <= 2000),
    raw         text        NOT NULL CHECK (length(raw) <= 16384),
    truncated   boolean     NOT NULL,
    byte_offset bigint      NOT NULL CHECK (byte_offset >= 0),
    line        integer     NOT NULL CHECK (line >= 0),
    created_at  timestamptz NOT NULL DEFAULT herald_now(),
    expires_at  timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
CREATE INDEX ingest_quarantine_run ON ingest_quarantine (run_id, id);
CREATE INDEX ingest_quarantine_provider ON ingest_quarantine (provider, id DESC);
CREATE INDEX ingest_quarantine_expiry ON ingest_quarantine (expires_at);
