-- Jobs by tenant and state, for the whole deployment (read for the platform). The
-- tenant label is bounded: the first 50 tenants by id are named, the rest are "other".
WITH labelled AS (
    SELECT id, CASE WHEN row_number() OVER (ORDER BY id) <= 50 THEN id ELSE 'other' END AS label
    FROM tenants
)
SELECT l.label AS tenant, j.state::text AS state, count(*)::float8 AS n
FROM jobs j JOIN labelled l ON l.id = j.tenant_id
GROUP BY 1, 2
