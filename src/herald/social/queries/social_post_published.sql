-- The post exists on its platform. Run in the job's completing transaction, so a
-- worker that lost its lease records nothing.
UPDATE social_posts
SET state = 'published', step = 'publish', platform_post_id = %(post_id)s,
    platform_url = %(url)s, published_at = herald_now(), updated_at = herald_now(), error = NULL
WHERE id = %(id)s AND job_id = %(job_id)s
RETURNING id
