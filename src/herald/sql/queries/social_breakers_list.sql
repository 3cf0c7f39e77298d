SELECT platform, state, failures, open_until, probe_until, opened, updated_at
FROM social_breakers ORDER BY platform
