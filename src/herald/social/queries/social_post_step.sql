-- Show the step a post's job is at (and its uploaded media), for GET /jobs/{id}.
UPDATE social_posts
SET step = %(step)s, media = coalesce(%(media)s::jsonb, media), updated_at = herald_now()
WHERE id = %(id)s AND job_id = %(job_id)s AND state = 'publishing'
