-- What stands between a job and its platform right now: the account's pause (a 429's
-- reset, or the pace the quota headers call for) and the platform's circuit breaker.
SELECT coalesce(greatest(0, extract(epoch FROM t.paused_until - herald_now())), 0)::float8
           AS paused_for,
       t.reason AS paused_because,
       coalesce(b.state, 'closed') AS breaker,
       coalesce(b.failures, 0) AS failures,
       coalesce(greatest(0, extract(epoch FROM b.open_until - herald_now())), 0)::float8
           AS open_for,
       coalesce(greatest(0, extract(epoch FROM b.probe_until - herald_now())), 0)::float8
           AS probe_for
FROM (SELECT 1) AS one
LEFT JOIN social_throttles t ON t.account_id = %(account_id)s
LEFT JOIN social_breakers b ON b.platform = %(platform)s
