UPDATE social_posts SET job_id = %(job_id)s, updated_at = herald_now() WHERE id = %(id)s
