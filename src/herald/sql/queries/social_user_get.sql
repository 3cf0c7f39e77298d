SELECT id, username, email, created_at FROM social_users WHERE id = %(id)s
