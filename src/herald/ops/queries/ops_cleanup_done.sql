-- The hook succeeded. Fenced by the attempt number of our claim.
UPDATE dead_letters
SET cleanup_state = 'done', cleanup_done_at = herald_now()
WHERE id = %(id)s AND cleanup_state = 'pending' AND cleanup_attempts = %(attempts)s
RETURNING id
