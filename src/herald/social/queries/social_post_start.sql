-- An attempt of a post's job begins: the post is taken up (a replayed job takes it over
-- from the dead one) and its account read, in one round trip. When the attempt goes
-- straight to its publish call (no media to upload, or resuming at publish,
-- and the credentials verified within verified_within seconds) the post's first publish
-- try is stamped here as well, by the database clock: since_first_try is 0 on the first
-- try, NULL when nothing was stamped. A post already published stays so, and answers
-- nothing.
WITH account AS (
    SELECT a.*,
           a.verified_at IS NOT NULL
               AND a.verified_at > herald_now() - make_interval(secs => %(verified_within)s)
               AS recently_verified
    FROM social_accounts a JOIN social_posts p ON p.account_id = a.id
    WHERE p.id = %(id)s
), post AS (
    SELECT p.id,
           (p.media_url IS NULL OR %(step)s = 'publish')
               AND coalesce((SELECT recently_verified FROM account), false) AS direct
    FROM social_posts p
    WHERE p.id = %(id)s AND p.state <> 'published'
), taken AS (
    UPDATE social_posts p
    SET state = 'publishing', job_id = %(job_id)s, updated_at = herald_now(),
        step = CASE WHEN d.direct THEN 'publish' ELSE %(step)s END,
        publish_started_at = CASE WHEN d.direct
                                  THEN coalesce(p.publish_started_at, herald_now())
                                  ELSE p.publish_started_at END
    FROM post d
    WHERE p.id = d.id AND p.state <> 'published'
    RETURNING p.id AS post_id, p.account_id, p.message, p.media_url,
              p.created_at AS post_created_at,
              extract(epoch FROM herald_now() - p.publish_started_at)::float8
                  AS since_first_try,
              d.direct
)
SELECT t.post_id, t.message, t.media_url, t.post_created_at, t.since_first_try, t.direct,
       a.id, a.user_id, a.owner, a.provider, a.name, a.external_id, a.base_url, a.options,
       a.credentials, a.status, a.status_reason, a.verified_at, a.created_at, a.updated_at,
       a.revoked_at, a.recently_verified
FROM taken t
JOIN account a ON a.id = t.account_id

