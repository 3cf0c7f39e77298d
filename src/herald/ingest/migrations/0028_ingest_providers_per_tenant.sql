-- A provider's name is its tenant's own (see the core's 0016_tenants): two tenants may
-- each register a provider of the same name. The provider key becomes (tenant, name),
-- and so do the keys that lead with it: the runs' and plans' references, one fetching
-- run per provider, a plan's identity. Existing rows already satisfy the narrower keys
-- they replace, and each run and plan has its provider's tenant (both took the
-- tenant of the session that wrote them, under the policy), so nothing is rewritten.
ALTER TABLE ingest_runs DROP CONSTRAINT ingest_runs_provider_fkey;
ALTER TABLE ingest_plans DROP CONSTRAINT ingest_plans_provider_fkey;
ALTER TABLE ingest_providers DROP CONSTRAINT ingest_providers_pkey;
ALTER TABLE ingest_providers ADD CONSTRAINT ingest_providers_pkey PRIMARY KEY (tenant_id, name);
ALTER TABLE ingest_runs ADD CONSTRAINT ingest_runs_provider_fkey
    FOREIGN KEY (tenant_id, provider) REFERENCES ingest_providers (tenant_id, name)
    ON DELETE CASCADE;
ALTER TABLE ingest_plans ADD CONSTRAINT ingest_plans_provider_fkey
    FOREIGN KEY (tenant_id, provider) REFERENCES ingest_providers (tenant_id, name)
    ON DELETE CASCADE;

DROP INDEX ingest_runs_one_fetching;
CREATE UNIQUE INDEX ingest_runs_one_fetching ON ingest_runs (tenant_id, provider)
    WHERE state = 'fetching';

ALTER TABLE ingest_plans DROP CONSTRAINT plan_identity;
ALTER TABLE ingest_plans ADD CONSTRAINT plan_identity
    UNIQUE (tenant_id, provider, base_plan_id, plan_id);
