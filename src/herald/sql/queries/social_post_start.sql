-- A job takes up its post (a replayed job takes it over from the dead one). A post
-- already published stays so, and answers nothing.
UPDATE social_posts
SET state = 'publishing', job_id = %(job_id)s, step = 'auth', updated_at = herald_now()
WHERE id = %(id)s AND state <> 'published'
RETURNING id, account_id, message, media_url, created_at, media
