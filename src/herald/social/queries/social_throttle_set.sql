-- Pause every call to an account for seconds (never shortening a longer pause).
INSERT INTO social_throttles AS t (account_id, paused_until, reason, updated_at)
VALUES (%(account_id)s, herald_now() + make_interval(secs => %(seconds)s), %(reason)s,
        herald_now())
ON CONFLICT (account_id) DO UPDATE
SET paused_until = greatest(t.paused_until, excluded.paused_until),
    reason = CASE WHEN excluded.paused_until > t.paused_until THEN excluded.reason
                  ELSE t.reason END,
    updated_at = herald_now()
