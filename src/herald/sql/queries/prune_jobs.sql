-- Delete finished jobs past their kind's retention, a small batch at a time.
-- Kinds listed with a negative retention keep their records forever.
WITH retention AS (
    SELECT * FROM unnest(%(kinds)s::text[], %(retention_s)s::float8[]) AS r(kind, seconds)
), doomed AS (
    SELECT j.id FROM jobs j
    LEFT JOIN retention r ON r.kind = j.kind
    WHERE j.finished_at IS NOT NULL
      AND coalesce(r.seconds, %(default_s)s) >= 0
      AND j.finished_at < herald_now() - make_interval(secs => coalesce(r.seconds, %(default_s)s))
    ORDER BY j.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM jobs j USING doomed d WHERE j.id = d.id
