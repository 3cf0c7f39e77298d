-- The admitted post gets its job, and the caller's idempotency key its post, in one
-- round trip (the same transaction as the post and the job).
WITH bound AS (
    UPDATE social_post_keys SET post_id = %(id)s WHERE owner = %(owner)s AND key = %(key)s
)
UPDATE social_posts SET job_id = %(job_id)s, updated_at = herald_now() WHERE id = %(id)s
