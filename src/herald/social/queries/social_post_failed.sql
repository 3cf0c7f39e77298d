-- The post will not be published by this job (permanent error, attempts spent).
UPDATE social_posts
SET state = 'failed', error = %(error)s, updated_at = herald_now()
WHERE id = %(id)s AND state <> 'published'
RETURNING id
