DELETE FROM console_sessions WHERE token_hash = %(token_hash)s RETURNING token_hash
