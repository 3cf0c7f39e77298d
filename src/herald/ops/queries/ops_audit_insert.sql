-- One audit record; the table's CHECKs refuse an empty actor or reason. It belongs to
-- the tenant the session acts for. In the platform context (an operator acting for
-- every tenant at once) it belongs to the tenant acted on: the one the caller names, a
-- tenant the target is, or the owner of the job or dead letter it targets; else to the
-- default tenant's log, the platform's own. A record of the platform context kept in
-- another tenant has a twin in the default tenant's log (the platform-side record),
-- returned second.
WITH acted_on AS (
    SELECT CASE WHEN NOT herald_platform() THEN herald_tenant()
                ELSE COALESCE(
                    %(tenant)s::text,
                    CASE %(target_type)s
                        WHEN 'tenant' THEN
                            (SELECT t.id FROM tenants t WHERE t.id = %(target_id)s)
                        WHEN 'job' THEN
                            (SELECT j.tenant_id FROM jobs j WHERE j.id = %(target_number)s)
                        WHEN 'dead_letter' THEN
                            (SELECT d.tenant_id FROM dead_letters d
                             WHERE d.id = %(target_number)s)
                    END,
                    'default')
           END AS tenant
), kept AS (
    SELECT u.tenant, u.n
    FROM acted_on a,
         unnest(CASE WHEN herald_platform() AND a.tenant <> 'default'
                     THEN ARRAY[a.tenant, 'default'] ELSE ARRAY[a.tenant] END)
             WITH ORDINALITY AS u (tenant, n)
)
INSERT INTO audit_log (tenant_id, actor, action, target_type, target_id, reason, before, after)
SELECT k.tenant, %(actor)s, %(action)s, %(target_type)s, %(target_id)s, %(reason)s,
       %(before)s::jsonb, %(after)s::jsonb
FROM kept k
ORDER BY k.n
RETURNING id, tenant_id, at, actor, action, target_type, target_id, reason, before, after
