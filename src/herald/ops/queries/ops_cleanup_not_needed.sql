-- Dead letters of kinds that declare no compensation hook have nothing to clean up.
WITH settled AS (
    SELECT id FROM dead_letters
    WHERE cleanup_state = 'pending' AND kind = ANY(%(kinds)s::text[])
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE dead_letters d
SET cleanup_state = 'not_needed', cleanup_done_at = herald_now()
FROM settled s
WHERE d.id = s.id
RETURNING d.id
