INSERT INTO social_posts (owner, account_id, message, media_url, idempotency_key, body_hash)
VALUES (%(owner)s, %(account_id)s, %(message)s, %(media_url)s, %(idempotency_key)s,
        %(body_hash)s)
RETURNING id, created_at
