-- A call failed transiently: count it; at the threshold (or a failed probe) the
-- breaker opens for open_s seconds.
INSERT INTO social_breakers AS b (platform, state, failures, open_until, opened)
VALUES (%(platform)s,
        CASE WHEN %(threshold)s::integer <= 1 THEN 'open' ELSE 'closed' END, 1,
        CASE WHEN %(threshold)s::integer <= 1
             THEN herald_now() + make_interval(secs => %(open_s)s) END,
        CASE WHEN %(threshold)s::integer <= 1 THEN 1 ELSE 0 END)
ON CONFLICT (platform) DO UPDATE
SET failures = b.failures + 1,
    state = CASE WHEN b.state = 'half_open' OR b.failures + 1 >= %(threshold)s::integer
                 THEN 'open' ELSE b.state END,
    open_until = CASE WHEN b.state = 'half_open'
                           OR (b.state = 'closed' AND b.failures + 1 >= %(threshold)s::integer)
                      THEN herald_now() + make_interval(secs => %(open_s)s)
                      ELSE b.open_until END,
    probe_until = NULL,
    opened = b.opened + CASE WHEN b.state <> 'open'
                                  AND (b.state = 'half_open'
                                       OR b.failures + 1 >= %(threshold)s::integer)
                             THEN 1 ELSE 0 END,
    updated_at = herald_now()
RETURNING state, failures
