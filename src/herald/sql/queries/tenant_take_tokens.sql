-- Take n submissions from the tenant's bucket (rate max_per_second, burst of one
-- second's worth, at least n). Granted: wait 0; else nothing is taken and wait says
-- when n will be there.
WITH level AS (
    SELECT id, greatest(max_per_second, %(n)s) AS burst, max_per_second AS rate,
           least(greatest(max_per_second, %(n)s),
                 tokens + max_per_second
                          * greatest(0, extract(epoch FROM herald_now() - tokens_at))::float8)
               AS now_tokens
    FROM tenants WHERE id = herald_tenant() AND max_per_second IS NOT NULL
    FOR UPDATE
)
UPDATE tenants t
SET tokens = CASE WHEN l.now_tokens >= %(n)s THEN l.now_tokens - %(n)s ELSE l.now_tokens END,
    tokens_at = greatest(t.tokens_at, herald_now())
FROM level l
WHERE t.id = l.id
RETURNING CASE WHEN l.now_tokens >= %(n)s THEN 0
               ELSE (%(n)s - l.now_tokens) / l.rate END AS wait
