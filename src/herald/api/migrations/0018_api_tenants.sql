-- Every API key belongs to a tenant (see the core's 0016_tenants) and acts for it; its
-- submissions are that tenant's. A key's name is unique within its tenant.
ALTER TABLE api_keys ADD COLUMN tenant_id text NOT NULL DEFAULT herald_tenant()
    REFERENCES tenants (id);
SELECT herald_isolate(t) FROM unnest(ARRAY['api_keys', 'api_submissions']::regclass[]) AS t;
DROP INDEX api_keys_live_name;
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (tenant_id, name) WHERE revoked_at IS NULL;
-- The platform operator's scope: acting across tenants, every action audited.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check CHECK (
    cardinality(scopes) >= 1
    AND scopes <@ ARRAY['submit', 'read', 'operate', 'admin', 'platform']::text[]
    AND array_position(scopes, NULL) IS NULL
);
