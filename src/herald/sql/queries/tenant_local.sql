-- Act for a tenant until the end of the current transaction (the session's tenant after).
SELECT set_config('herald.tenant', %(tenant)s, true) AS tenant
