-- HTTP API: bearer keys (only their SHA-256 is stored) and which key admitted which job,
-- so a per-key quota on active jobs can be enforced.

CREATE TABLE api_keys (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text        NOT NULL CHECK (name ~ '^[A-Za-z0-9_.:@-]{1,100}$'),
    hash            text        NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
    scopes          text[]      NOT NULL CHECK (
        cardinality(scopes) >= 1
        AND scopes <@ ARRAY['submit', 'read', 'operate', 'admin']::text[]
        AND array_position(scopes, NULL) IS NULL
    ),
    -- at most this many of the key's jobs may be waiting or running; NULL = no limit.
    max_active_jobs integer     CHECK (max_active_jobs IS NULL OR max_active_jobs >= 1),
    created_at      timestamptz NOT NULL DEFAULT herald_now(),
    revoked_at      timestamptz,
    CONSTRAINT revoked_after_created CHECK (revoked_at IS NULL OR revoked_at >= created_at)
);
-- A name identifies one live key (it is the actor of audit records); revoked names may return.
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (name) WHERE revoked_at IS NULL;

-- Written in the admission's transaction. Pruning a job removes its row with it.
CREATE TABLE api_submissions (
    job_id     bigint      PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    api_key_id bigint      NOT NULL REFERENCES api_keys (id),
    created_at timestamptz NOT NULL DEFAULT herald_now()
);
CREATE INDEX api_submissions_key ON api_submissions (api_key_id, job_id);
