-- Reclaim the jobs table's dead row versions and refresh its statistics. SKIP_LOCKED: a
-- vacuum another process (or autovacuum) is running already is not waited for.
VACUUM (SKIP_LOCKED, ANALYZE) jobs
