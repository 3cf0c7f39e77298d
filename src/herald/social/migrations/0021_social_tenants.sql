-- The social application's records belong to a tenant (see the core's 0016_tenants):
-- users, accounts, posts and their keys, and the per-account throttles. The circuit
-- breakers are per platform (a remote service's health is the same for everyone) and
-- stay the deployment's.
SELECT herald_isolate(t)
FROM unnest(ARRAY['social_users', 'social_accounts', 'social_posts', 'social_post_keys',
                  'social_throttles']::regclass[]) AS t;
