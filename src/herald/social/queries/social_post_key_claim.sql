-- Take an owner's idempotency key for a new request (or take over an expired one), read
-- the account the post is for and take the post's id ahead, in one round trip. Keys are
-- per tenant (the tenant defaults to the session's).
-- claimed false: the key is live and belongs to an earlier request (read it next).
-- status NULL: no such account (for this tenant).
WITH claimed AS (
    INSERT INTO social_post_keys AS k (owner, key, body_hash, post_id, created_at, expires_at)
    VALUES (%(owner)s, %(key)s, %(body_hash)s, NULL, herald_now(),
            herald_now() + make_interval(secs => %(retention_s)s))
    ON CONFLICT (tenant_id, owner, key) DO UPDATE
    SET body_hash = excluded.body_hash, post_id = NULL, created_at = excluded.created_at,
        expires_at = excluded.expires_at
    WHERE k.expires_at <= herald_now()
    RETURNING k.owner
)
SELECT EXISTS (SELECT FROM claimed) AS claimed, a.provider, a.status, a.status_reason,
       nextval(pg_get_serial_sequence('social_posts', 'id')) AS post_id
FROM (VALUES (1)) AS one
LEFT JOIN social_accounts a ON a.id = %(account_id)s
