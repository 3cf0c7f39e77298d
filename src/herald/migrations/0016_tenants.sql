-- Tenants: every record belongs to one, and PostgreSQL keeps each tenant's rows apart.
--
-- The tenant of a session is the setting `herald.tenant`, which Herald sets on every
-- connection it hands out (from the key of the request, or the job being run); it is
-- never read from input. Unset means the default tenant, so an install that never
-- mentions tenants keeps working. `*` is the platform context: the engine's claim,
-- rescue, maintenance and scheduler, and an audited platform operator, see every row.
-- Row-level security applies to Herald's runtime role (herald_runtime, created here):
-- superusers and BYPASSRLS roles skip it, so Herald's pools switch to that role.

CREATE TABLE tenants (
    id                  text        PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name                text        NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    -- admission quotas (NULL: unlimited): jobs waiting or running, submissions per
    -- second (a token bucket of that rate and a one-second burst), payload bytes per job.
    max_active_jobs     integer     CHECK (max_active_jobs >= 1),
    max_per_second      double precision CHECK (max_per_second > 0),
    max_payload_bytes   integer     CHECK (max_payload_bytes >= 2),
    created_at          timestamptz NOT NULL DEFAULT herald_now()
);
INSERT INTO tenants (id, name) VALUES ('default', 'Default tenant');

-- The session's tenant; the default one when Herald never set it.
CREATE FUNCTION herald_tenant() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(current_setting('herald.tenant', true), ''), 'default')
$$;

-- Whether the session acts for the platform (every tenant).
CREATE FUNCTION herald_platform() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(current_setting('herald.tenant', true), '') = '*'
$$;

-- Give a table its owner column and isolate it. The column defaults to the session's
-- tenant, so inserts need not name it; the CHECK refuses the platform marker `*`
-- (a platform-context insert must name the tenant). The policy's sub-selects run once
-- per statement (init plans), and the platform context short-circuits the comparison.
-- FORCE: the table's owner is held to the policy too.
CREATE FUNCTION herald_isolate(target regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS tenant_id text NOT NULL '
                   'DEFAULT herald_tenant() CHECK (tenant_id ~ ''^[a-z0-9][a-z0-9_-]{0,62}$'')',
                   target);
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', target);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', target);
    EXECUTE format('CREATE POLICY tenant_isolation ON %s USING ((SELECT herald_platform()) '
                   'OR tenant_id = (SELECT herald_tenant()))', target);
END
$$;

SELECT herald_isolate(t) FROM unnest(ARRAY['jobs', 'key_versions', 'idempotency_keys',
    'dead_letters', 'stale_writes', 'rescues']::regclass[]) AS t;

-- Object keys, versions and idempotency keys are per tenant.
DROP INDEX jobs_one_active_per_key;
CREATE UNIQUE INDEX jobs_one_active_per_key ON jobs (tenant_id, kind, key)
    WHERE key IS NOT NULL AND state IN ('waiting', 'running');
DROP INDEX jobs_version_per_key;
CREATE UNIQUE INDEX jobs_version_per_key ON jobs (tenant_id, kind, key, version)
    WHERE key IS NOT NULL;
ALTER TABLE key_versions DROP CONSTRAINT key_versions_pkey,
    ADD PRIMARY KEY (tenant_id, kind, key);
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey,
    ADD PRIMARY KEY (tenant_id, key);
-- Claim order per queue and tenant: the claim reads each tenant's slice (fairness).
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (queue, tenant_id, priority DESC, run_at, id)
    WHERE state = 'waiting';
-- A tenant's active jobs, counted by the admission quota.
CREATE INDEX jobs_tenant_active ON jobs (tenant_id) WHERE state IN ('waiting', 'running');

-- The runtime role: no superuser, no BYPASSRLS, no login (a connection switches to it).
-- Roles are cluster-wide and several schemas may migrate at once: create it only once.
DO $$
BEGIN
    CREATE ROLE herald_runtime NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

-- What it may do in this schema, now and on the tables later migrations create. A
-- connecting role that is not a superuser must be a member to switch to it.
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO herald_runtime', current_schema());
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I '
                   'TO herald_runtime', current_schema());
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I '
                   'TO herald_runtime', current_schema());
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, '
                   'DELETE ON TABLES TO herald_runtime', current_schema());
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT, UPDATE '
                   'ON SEQUENCES TO herald_runtime', current_schema());
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT herald_runtime TO %I', current_user);
    END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION herald_isolate(regclass) FROM PUBLIC;

-- The submissions-per-second quota's bucket: tokens left as of tokens_at.
ALTER TABLE tenants ADD COLUMN tokens double precision NOT NULL DEFAULT 1 CHECK (tokens >= 0),
    ADD COLUMN tokens_at timestamptz NOT NULL DEFAULT herald_now();
-- A tenant's session sees its own tenant row only (the platform sees them all).
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants
    USING ((SELECT herald_platform()) OR id = (SELECT herald_tenant()));
