-- Whether searches are being served now, for ingestion to yield to them: a search pool
-- session on this server (any database: they share its CPUs) running a statement, or
-- done with one within the last recent_s seconds (the pool keeps its sessions, so an
-- idle one that just answered counts). Another role's session shows no state without
-- pg_read_all_stats: it counts as busy, since ingestion cannot tell. Writes nothing.
SELECT coalesce(bool_or(state IS NULL OR state = 'active'
                        OR state_change > now() - make_interval(secs => %(recent_s)s)),
                false) AS busy
FROM pg_stat_activity
WHERE application_name = %(application)s AND pid <> pg_backend_pid()
