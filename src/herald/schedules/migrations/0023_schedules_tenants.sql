-- Schedules and their fire ledger belong to a tenant (see the core's 0016_tenants); a
-- schedule fires its jobs in its own tenant.
SELECT herald_isolate(t) FROM unnest(ARRAY['schedules', 'schedule_fires']::regclass[]) AS t;
DROP INDEX schedules_object;
CREATE INDEX schedules_object ON schedules (tenant_id, kind, key);
