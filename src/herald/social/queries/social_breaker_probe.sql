-- Become the one probe of an open breaker whose time is up (or whose last probe never
-- reported back). No row: someone else is probing.
UPDATE social_breakers
SET state = 'half_open', probe_until = herald_now() + make_interval(secs => %(probe_s)s),
    updated_at = herald_now()
WHERE platform = %(platform)s
  AND ((state = 'open' AND open_until <= herald_now())
       OR (state = 'half_open' AND (probe_until IS NULL OR probe_until <= herald_now())))
RETURNING platform
