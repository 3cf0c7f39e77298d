-- The role this connection runs as.
SELECT current_user::text AS role
