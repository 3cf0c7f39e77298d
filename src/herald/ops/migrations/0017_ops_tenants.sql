-- The operations' records belong to a tenant (see the core's 0016_tenants): the audit
-- log, and the limiter state, whose keys are now per tenant.
SELECT herald_isolate(t)
FROM unnest(ARRAY['audit_log', 'rate_limits', 'concurrency_slots']::regclass[]) AS t;
ALTER TABLE rate_limits DROP CONSTRAINT rate_limits_pkey, ADD PRIMARY KEY (tenant_id, key);
ALTER TABLE concurrency_slots DROP CONSTRAINT concurrency_slots_pkey,
    ADD PRIMARY KEY (tenant_id, key, slot);
