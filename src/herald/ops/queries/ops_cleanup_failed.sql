-- The hook failed: keep the record pending and try again after the backoff delay.
UPDATE dead_letters
SET cleanup_last_error = %(error)s,
    cleanup_next_at = herald_now() + make_interval(secs => %(delay_s)s)
WHERE id = %(id)s AND cleanup_state = 'pending' AND cleanup_attempts = %(attempts)s
RETURNING id
