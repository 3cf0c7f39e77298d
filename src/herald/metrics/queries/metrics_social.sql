-- Social publishing figures every process shares, as (metric, help, labels, value) rows:
-- retained posts by platform and state, accounts by platform and status, accounts
-- paused now, and each platform's circuit breaker (its state as 1 for the current one,
-- its failures in a row, how often it opened).
SELECT 'herald_social_posts_retained' AS metric,
       'Posts retained, by platform and state (queued, publishing, published, failed)' AS help,
       jsonb_build_object('platform', a.provider, 'state', p.state) AS labels,
       count(*)::float8 AS value
FROM social_posts p JOIN social_accounts a ON a.id = p.account_id
GROUP BY a.provider, p.state
UNION ALL
SELECT 'herald_social_accounts', 'Linked accounts, by platform and status',
       jsonb_build_object('platform', provider, 'status', status), count(*)::float8
FROM social_accounts GROUP BY provider, status
UNION ALL
SELECT 'herald_social_accounts_paused', 'Accounts paused now (a 429, or a quota running low)',
       jsonb_build_object('platform', a.provider), count(*)::float8
FROM social_throttles t JOIN social_accounts a ON a.id = t.account_id
WHERE t.paused_until > herald_now() GROUP BY a.provider
UNION ALL
SELECT 'herald_social_breaker_state', 'Circuit breaker per platform: 1 for its current state',
       jsonb_build_object('platform', b.platform, 'state', s.state),
       (b.state = s.state)::int::float8
FROM social_breakers b
CROSS JOIN (VALUES ('closed'), ('open'), ('half_open')) AS s(state)
UNION ALL
SELECT 'herald_social_breaker_failures', 'Transient failures in a row, per platform',
       jsonb_build_object('platform', platform), failures::float8
FROM social_breakers
UNION ALL
SELECT 'herald_social_breaker_opened', 'Times the platform''s circuit breaker opened',
       jsonb_build_object('platform', platform), opened::float8
FROM social_breakers
