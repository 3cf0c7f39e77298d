-- One audit record; the table's CHECKs refuse an empty actor or reason. It belongs to
-- the tenant the session acts for; an action of the platform context (every tenant at
-- once) is recorded in the default tenant's log, the platform's own.
INSERT INTO audit_log (tenant_id, actor, action, target_type, target_id, reason, before, after)
VALUES (CASE WHEN herald_platform() THEN 'default' ELSE herald_tenant() END,
        %(actor)s, %(action)s, %(target_type)s, %(target_id)s, %(reason)s,
        %(before)s::jsonb, %(after)s::jsonb)
RETURNING id, tenant_id, at, actor, action, target_type, target_id, reason, before, after
