-- A call to the platform worked: the breaker closes and its failure count restarts.
UPDATE social_breakers
SET state = 'closed', failures = 0, open_until = NULL, probe_until = NULL,
    updated_at = herald_now()
WHERE platform = %(platform)s AND (state <> 'closed' OR failures > 0)
