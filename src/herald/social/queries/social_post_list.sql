-- Posts, newest first, for the operator console: by account and state, before an id.
SELECT p.id, p.owner, p.account_id, a.provider, a.name AS account_name, p.message,
       p.media_url, p.job_id, p.state, p.step, p.platform_url, p.error, p.created_at,
       p.published_at
FROM social_posts p JOIN social_accounts a ON a.id = p.account_id
WHERE (%(account_id)s::bigint IS NULL OR p.account_id = %(account_id)s)
  AND (%(state)s::text IS NULL OR p.state = %(state)s)
  AND (%(before_id)s::bigint IS NULL OR p.id < %(before_id)s)
ORDER BY p.id DESC
LIMIT %(limit)s
