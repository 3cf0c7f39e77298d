-- Mark the first publish try of a post (kept across attempts and replays) and answer
-- the seconds since it, by the database clock (0 on the first try).
UPDATE social_posts
SET publish_started_at = coalesce(publish_started_at, herald_now()), step = 'publish',
    updated_at = herald_now()
WHERE id = %(id)s
RETURNING extract(epoch FROM herald_now() - publish_started_at)::float8 AS since_first_try
