-- A post with its account's provider (what GET /jobs/{id} shows beside the job).
SELECT p.id, p.owner, p.account_id, a.provider, p.message, p.media_url, p.idempotency_key,
       p.job_id, p.state, p.step, p.media, p.publish_started_at, p.platform_post_id,
       p.platform_url, p.error, p.created_at, p.updated_at, p.published_at
FROM social_posts p JOIN social_accounts a ON a.id = p.account_id
WHERE (%(id)s::bigint IS NULL OR p.id = %(id)s)
  AND (%(job_id)s::bigint IS NULL OR p.job_id = %(job_id)s)
  AND (%(id)s::bigint IS NOT NULL OR %(job_id)s::bigint IS NOT NULL)
