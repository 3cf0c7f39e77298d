-- Token buckets as (metric, help, labels, value) rows: grants, waits (denials), level.
SELECT 'herald_rate_limit_waits' AS metric,
       'Token requests that had to wait (the job was snoozed), by limiter key' AS help,
       jsonb_build_object('key', key) AS labels, denied::float8 AS value
FROM rate_limits
UNION ALL
SELECT 'herald_rate_limit_grants', 'Tokens granted, by limiter key',
       jsonb_build_object('key', key), granted::float8
FROM rate_limits
UNION ALL
SELECT 'herald_rate_limit_tokens', 'Tokens available now, by limiter key',
       jsonb_build_object('key', key),
       least(burst, tokens + rate * greatest(0, extract(epoch FROM herald_now() - updated_at)))::float8
FROM rate_limits
