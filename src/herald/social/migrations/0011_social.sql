-- Social publishing: users, linked platform accounts, posts, and the shared state of
-- per-platform circuit breakers and per-account throttles. Every state machine is held
-- by CHECK constraints; credentials exist only as ciphertext, and not at all once revoked.

CREATE TABLE social_users (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username   text        NOT NULL UNIQUE CHECK (username ~ '^[A-Za-z0-9_.-]{1,100}$'),
    email      text        NOT NULL CHECK (length(email) <= 320 AND email ~ '^[^@\s]+@[^@\s]+$'),
    created_at timestamptz NOT NULL DEFAULT herald_now()
);

-- A linked account. credentials is the Fernet ciphertext of the account's credentials
-- (bound to the row by its provider, base URL and external id), wiped on revocation.
--   active -> needs_reauth (a 401) -> active (credentials replaced)
--   active | needs_reauth -> revoking (disconnect asked) -> revoked (credentials gone)
CREATE TABLE social_accounts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       bigint REFERENCES social_users (id),
    owner         text        NOT NULL CHECK (owner <> '' AND length(owner) <= 200),
    provider      text        NOT NULL
        CHECK (provider IN ('mastodon', 'bluesky', 'facebook', 'webhook')),
    name          text        NOT NULL CHECK (name <> '' AND length(name) <= 200),
    external_id   text        NOT NULL CHECK (external_id <> '' AND length(external_id) <= 500),
    base_url      text        NOT NULL CHECK (base_url ~ '^https?://' AND length(base_url) <= 2000),
    options       jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(options) = 'object'),
    credentials   text,
    status        text        NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'needs_reauth', 'revoking', 'revoked')),
    status_reason text        CHECK (length(status_reason) <= 4000),
    verified_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT herald_now(),
    updated_at    timestamptz NOT NULL DEFAULT herald_now(),
    revoked_at    timestamptz,
    CONSTRAINT social_accounts_credentials_iff_not_revoked
        CHECK ((status = 'revoked') = (credentials IS NULL)),
    CONSTRAINT social_accounts_revoked_at_iff_revoked
        CHECK ((status = 'revoked') = (revoked_at IS NOT NULL)),
    CONSTRAINT social_accounts_reason_when_not_active
        CHECK (status = 'active' OR status_reason IS NOT NULL)
);
-- An account is linked once at a time (revoked rows stay for the posts' history).
CREATE UNIQUE INDEX social_accounts_linked_once
    ON social_accounts (provider, base_url, external_id) WHERE status <> 'revoked';

-- A post to one account, published by one job at a time (job_id: the newest).
--   queued -> publishing -> published
--   queued | publishing -> failed (permanent, attempts spent, account revoked)
--   failed -> queued (a dead letter replayed)
CREATE TABLE social_posts (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner              text        NOT NULL CHECK (owner <> '' AND length(owner) <= 200),
    account_id         bigint      NOT NULL REFERENCES social_accounts (id),
    message            text        NOT NULL CHECK (length(message) <= 100000),
    media_url          text        CHECK (length(media_url) <= 4000),
    idempotency_key    text        NOT NULL CHECK (idempotency_key <> '' AND length(idempotency_key) <= 255),
    body_hash          text        NOT NULL CHECK (body_hash ~ '^[0-9a-f]{64}$'),
    job_id             bigint,
    state              text        NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'publishing', 'published', 'failed')),
    step               text        CHECK (step IN ('auth', 'media', 'publish')),
    media              jsonb,
    publish_started_at timestamptz,
    platform_post_id   text,
    platform_url       text,
    error              text        CHECK (length(error) <= 8000),
    created_at         timestamptz NOT NULL DEFAULT herald_now(),
    updated_at         timestamptz NOT NULL DEFAULT herald_now(),
    published_at       timestamptz,
    CONSTRAINT social_posts_published_has_platform_id CHECK (
        (state = 'published') = (platform_post_id IS NOT NULL AND published_at IS NOT NULL)
    ),
    CONSTRAINT social_posts_failed_has_reason CHECK (state <> 'failed' OR error IS NOT NULL)
);
CREATE UNIQUE INDEX social_posts_job ON social_posts (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX social_posts_account_state ON social_posts (account_id, state);

-- Idempotency of POST /social/posts: per owner, a key stands for one request body for
-- 24 hours; the row is taken over by a new request once expired.
CREATE TABLE social_post_keys (
    owner      text        NOT NULL,
    key        text        NOT NULL CHECK (key <> '' AND length(key) <= 255),
    body_hash  text        NOT NULL,
    post_id    bigint      REFERENCES social_posts (id),
    created_at timestamptz NOT NULL DEFAULT herald_now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (owner, key),
    CHECK (expires_at > created_at)
);
CREATE INDEX social_post_keys_expiry ON social_post_keys (expires_at);

-- Per-platform circuit breakers shared by every worker.
--   closed -> open (consecutive failures reached the threshold) -> half_open (one probe
--   after open_until) -> closed (probe succeeded) | open (probe failed)
CREATE TABLE social_breakers (
    platform   text        PRIMARY KEY
        CHECK (platform IN ('mastodon', 'bluesky', 'facebook', 'webhook')),
    state      text        NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
    failures   integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    open_until timestamptz,
    probe_until timestamptz,
    opened     bigint      NOT NULL DEFAULT 0 CHECK (opened >= 0),
    updated_at timestamptz NOT NULL DEFAULT herald_now(),
    CONSTRAINT social_breakers_open_has_deadline CHECK (state <> 'open' OR open_until IS NOT NULL)
);

-- Per-account pauses every worker honours: a 429's reset time, or the pace the
-- platform's remaining-quota headers call for.
CREATE TABLE social_throttles (
    account_id   bigint      PRIMARY KEY REFERENCES social_accounts (id),
    paused_until timestamptz NOT NULL,
    reason       text        NOT NULL CHECK (length(reason) <= 1000),
    updated_at   timestamptz NOT NULL DEFAULT herald_now()
);
