-- Read the pending message and clear it in one statement: it is shown once.
UPDATE console_sessions s SET flash = NULL
FROM (SELECT token_hash, flash FROM console_sessions
      WHERE token_hash = %(token_hash)s FOR UPDATE) old
WHERE s.token_hash = old.token_hash AND old.flash IS NOT NULL
RETURNING old.flash
