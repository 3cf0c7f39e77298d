-- What tenancy (0016) cost every job, taken back without loosening isolation.
--
-- 1. The tenant column's CHECK ran a bounded regular expression ({0,62}) on every row
--    written: PostgreSQL's regex engine unrolls the bound into dozens of states, about
--    1.7 us a row, 15 % of a bulk admission. The same names pass an unbounded pattern
--    and a length test (the pattern allows ASCII only, so characters are bytes), ten
--    times cheaper. Replaced on every table isolated so far, and in herald_isolate for
--    tables isolated later.
-- 2. jobs_tenant_active (tenant_id, for the active-jobs quota) was one more index entry
--    per admission and per claim, and, on a table without statistics, the claim's
--    generic plan chose it over the claim index: it read and sorted the tenant's whole
--    backlog (48,500 rows, on disk) for a batch of 500. Dropped; the claim index now
--    leads with the tenant, so a tenant's waiting jobs are one slice of it (the quota
--    counts those and the running jobs of the lease index, tenant_active_usage.sql).

-- Give a table's tenant column the cheap CHECK in place of the bounded pattern (the
-- name stays the one 0016 gave it, <table>_tenant_id_check).
CREATE FUNCTION herald_tenant_check(target regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    bounded name;
BEGIN
    FOR bounded IN
        SELECT con.conname
        FROM pg_constraint con
        JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey)
        WHERE con.conrelid = target AND con.contype = 'c' AND a.attname = 'tenant_id'
          AND pg_get_constraintdef(con.oid) LIKE '%{0,62}%'
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I, ADD CONSTRAINT %I CHECK '
                       '(length(tenant_id) <= 63 AND tenant_id ~ ''^[a-z0-9][a-z0-9_-]*$'')',
                       target, bounded, bounded);
    END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION herald_tenant_check(regclass) FROM PUBLIC;

SELECT herald_tenant_check(c.oid)
FROM pg_class c
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
  AND c.relkind = 'r' AND c.relrowsecurity;

-- Tables isolated from now on: 0016's isolation, then the cheap CHECK.
ALTER FUNCTION herald_isolate(regclass) RENAME TO herald_isolate_0016;
CREATE FUNCTION herald_isolate(target regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM herald_isolate_0016(target);
    PERFORM herald_tenant_check(target);
END
$$;
REVOKE EXECUTE ON FUNCTION herald_isolate(regclass) FROM PUBLIC;

DROP INDEX jobs_tenant_active;
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (tenant_id, queue, priority DESC, run_at, id)
    WHERE state = 'waiting';
