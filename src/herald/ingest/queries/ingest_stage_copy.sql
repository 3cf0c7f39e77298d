COPY pg_temp.ingest_stage_buffer (run_id, max_attempts, base_plan_id, plan_id, title, starts_at, ends_at, sell_mode, online, min_price, max_price, zones) FROM STDIN (FORMAT BINARY)
