-- Drop dead letters past their retention, a batch at a time; one whose compensation is
-- still owed (cleanup pending) is kept until the cleanup runner has done it.
DELETE FROM dead_letters
WHERE id IN (SELECT id FROM dead_letters
             WHERE created_at < herald_now() - make_interval(secs => %(retention_s)s)
               AND cleanup_state <> 'pending'
             ORDER BY id LIMIT %(batch)s)
RETURNING id
