-- Take one token from the bucket of key in one atomic upsert. The level is refilled at
-- rate per second since updated_at, up to burst:
--   level = least(burst, tokens + rate * seconds since updated_at)
-- level >= 1: a token is granted (wait 0); otherwise nothing is taken and wait is the
-- time until one will be available. updated_at never moves backwards (a statement that
-- waited for the row lock has an older clock), and is returned as the decision's time.
INSERT INTO rate_limits AS b (key, rate, burst, tokens, updated_at, last_wait, granted)
VALUES (%(key)s::text, %(rate)s::float8, %(burst)s::float8, %(burst)s::float8 - 1, herald_now(), 0, 1)
ON CONFLICT (tenant_id, key) DO UPDATE
SET rate = excluded.rate,
    burst = excluded.burst,
    tokens = CASE
        WHEN least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8) >= 1
        THEN least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8) - 1
        ELSE least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8)
    END,
    last_wait = CASE
        WHEN least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8) >= 1
        THEN 0
        ELSE (1 - least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8))
             / excluded.rate
    END,
    granted = b.granted + CASE
        WHEN least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8) >= 1
        THEN 1 ELSE 0 END,
    denied = b.denied + CASE
        WHEN least(excluded.burst, b.tokens + excluded.rate
                   * greatest(0, extract(epoch FROM herald_now() - b.updated_at))::float8) >= 1
        THEN 0 ELSE 1 END,
    updated_at = greatest(b.updated_at, herald_now())
RETURNING last_wait AS wait, updated_at AS at, tokens
