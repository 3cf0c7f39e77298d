-- Whether this process should vacuum the jobs table itself: its dead rows are past the
-- bar, and the server's autovacuum is off or has not vacuumed the table for `lag_s`
-- seconds (starved by other tables, other databases). Every claim, completion and prune
-- leaves dead row versions behind; unvacuumed, the heap and its indexes grow without
-- bound and every claim reads further. Only the table's owner (or a superuser) may
-- vacuum it: any other login leaves it to the server.
SELECT s.n_dead_tup > %(min_dead)s + %(dead_fraction)s * s.n_live_tup
       AND (NOT current_setting('autovacuum')::bool
            OR coalesce(greatest(s.last_autovacuum, s.last_vacuum), 'epoch'::timestamptz)
               < now() - make_interval(secs => %(lag_s)s))
       AND pg_has_role(c.relowner, 'USAGE') AS due,
       s.n_dead_tup AS dead
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
WHERE s.relid = 'jobs'::regclass
