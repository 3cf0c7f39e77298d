-- A job takes up its post (a replayed job takes it over from the dead one) and reads
-- its account in the same round trip. A post already published stays so, and answers
-- nothing.
WITH taken AS (
    UPDATE social_posts
    SET state = 'publishing', job_id = %(job_id)s, step = 'auth', updated_at = herald_now()
    WHERE id = %(id)s AND state <> 'published'
    RETURNING id AS post_id, account_id, message, media_url, created_at AS post_created_at
)
SELECT t.post_id, t.message, t.media_url, t.post_created_at,
       a.id, a.user_id, a.owner, a.provider, a.name, a.external_id, a.base_url, a.options,
       a.credentials, a.status, a.status_reason, a.verified_at, a.created_at, a.updated_at,
       a.revoked_at,
       a.verified_at IS NOT NULL
           AND a.verified_at > herald_now() - make_interval(secs => %(verified_within)s)
           AS recently_verified
FROM taken t JOIN social_accounts a ON a.id = t.account_id
