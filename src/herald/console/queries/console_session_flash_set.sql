UPDATE console_sessions SET flash = %(flash)s::jsonb WHERE token_hash = %(token_hash)s
