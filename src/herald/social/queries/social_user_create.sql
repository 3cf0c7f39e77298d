-- Register a user (the unique username refuses a second one).
INSERT INTO social_users (username, email)
VALUES (%(username)s, %(email)s)
RETURNING id, username, email, created_at
