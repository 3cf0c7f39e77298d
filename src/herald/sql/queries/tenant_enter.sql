-- A pooled connection's first checkout: switch to the runtime role (row-level security
-- applies to it, not to a superuser) once this schema grants it anything, and act for
-- the tenant. Until migrated, the connection keeps the role it logged in as.
SELECT set_config('role',
                  CASE WHEN to_regrole(%(role)s) IS NOT NULL
                            AND has_schema_privilege(%(role)s, current_schema(), 'USAGE')
                            AND to_regclass('tenants') IS NOT NULL
                       THEN %(role)s ELSE 'none' END,
                  false) AS role,
       set_config('herald.tenant', %(tenant)s, false) AS tenant
