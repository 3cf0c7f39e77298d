-- The request an owner's live idempotency key stands for, with its post and job.
SELECT k.body_hash, k.post_id, p.job_id, p.state
FROM social_post_keys k LEFT JOIN social_posts p ON p.id = k.post_id
WHERE k.owner = %(owner)s AND k.key = %(key)s
