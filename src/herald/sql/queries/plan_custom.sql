-- Plan the statements that follow in this transaction for their own values (on a
-- connection that otherwise keeps one generic plan per statement).
SET LOCAL plan_cache_mode = force_custom_plan
