-- Every bucket with its current level (refilled to now) and its grant/denial counts.
SELECT key, rate, burst,
       least(burst, tokens + rate
             * greatest(0, extract(epoch FROM herald_now() - updated_at))::float8) AS tokens,
       granted, denied, updated_at
FROM rate_limits
ORDER BY key
