SELECT id, base_plan_id, plan_id, attempts, last_error
FROM ingest_staged WHERE run_id = %(run_id)s AND state = 'failed'
ORDER BY id LIMIT %(limit)s
