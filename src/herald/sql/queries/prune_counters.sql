-- Stale-write and rescue records older than the default retention.
WITH s AS (
    DELETE FROM stale_writes WHERE id IN (
        SELECT id FROM stale_writes
        WHERE at < herald_now() - make_interval(secs => %(default_s)s)
        LIMIT %(limit)s)
    RETURNING 1
), r AS (
    DELETE FROM rescues WHERE id IN (
        SELECT id FROM rescues
        WHERE at < herald_now() - make_interval(secs => %(default_s)s)
        LIMIT %(limit)s)
    RETURNING 1
)
SELECT (SELECT count(*) FROM s) + (SELECT count(*) FROM r) AS deleted
