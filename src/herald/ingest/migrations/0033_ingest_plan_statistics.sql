-- Fresh planner statistics for the canonical plans after a bulk change (see
-- herald.ingest.processing): a run that processed many rows ends by analyzing
-- ingest_plans, so search plans are chosen on what the table holds now rather than on
-- what it held before the load (autovacuum gets there too, but minutes later on a busy
-- server). ANALYZE needs the table's owner: the function runs as its owner (the role
-- that migrated the schema), with this schema's search path fixed, so a worker
-- connected under any role can ask for it and can do nothing else with it.
CREATE FUNCTION ingest_refresh_plan_statistics(processed bigint, at_least bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    known real;
BEGIN
    SELECT reltuples INTO known FROM pg_class WHERE oid = 'ingest_plans'::regclass;
    -- Below the floor, or a small share of what the statistics already describe (the
    -- same 10 % autovacuum uses by default): the statistics still hold.
    IF processed < at_least OR (known >= 0 AND processed < 0.1 * known) THEN
        RETURN false;
    END IF;
    ANALYZE ingest_plans;
    RETURN true;
END
$$;
REVOKE EXECUTE ON FUNCTION ingest_refresh_plan_statistics(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest_refresh_plan_statistics(bigint, bigint) TO herald_runtime;
