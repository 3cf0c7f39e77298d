-- Act for another tenant on a connection already under the runtime role.
SELECT set_config('herald.tenant', %(tenant)s, false) AS tenant
