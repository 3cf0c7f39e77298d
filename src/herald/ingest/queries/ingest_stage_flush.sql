-- The batch copied into the buffer becomes staged rows of the tenant acting now.
INSERT INTO ingest_staged (run_id, max_attempts, base_plan_id, plan_id, title, starts_at,
                           ends_at, sell_mode, online, min_price, max_price, zones)
SELECT run_id, max_attempts, base_plan_id, plan_id, title, starts_at, ends_at, sell_mode,
       online, min_price, max_price, zones
FROM pg_temp.ingest_stage_buffer
