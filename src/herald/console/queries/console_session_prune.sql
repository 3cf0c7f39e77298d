-- Expired sessions are of no use to anyone: removed at each sign-in.
DELETE FROM console_sessions WHERE expires_at <= herald_now()
