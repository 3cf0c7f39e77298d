-- The post, with the id taken ahead by social_post_key_claim and its job admitted
-- already, and the caller's idempotency key bound to it: one round trip. (The key's
-- reference to the post is checked at the end of the statement, once the post exists.)
WITH bound AS (
    UPDATE social_post_keys SET post_id = %(id)s
    WHERE owner = %(owner)s AND key = %(idempotency_key)s
)
INSERT INTO social_posts (id, owner, account_id, message, media_url, idempotency_key,
                          body_hash, job_id)
OVERRIDING SYSTEM VALUE
VALUES (%(id)s, %(owner)s, %(account_id)s, %(message)s, %(media_url)s, %(idempotency_key)s,
        %(body_hash)s, %(job_id)s)
