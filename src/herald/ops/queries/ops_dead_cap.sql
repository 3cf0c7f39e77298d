-- Keep at most the cap of settled dead letters (the newest); older ones go, a batch at a
-- time. Dead letters whose compensation is still owed are neither counted nor dropped.
DELETE FROM dead_letters
WHERE id IN (SELECT id FROM dead_letters
             WHERE cleanup_state <> 'pending'
             ORDER BY id DESC OFFSET %(cap)s LIMIT %(batch)s)
RETURNING id
