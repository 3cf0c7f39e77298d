-- Plans ever online inside [starts_at, ends_at], after the cursor, in (start, id) order.
SELECT id, provider, base_plan_id, plan_id, title, starts_at, ends_at, min_price, max_price
FROM ingest_plans
WHERE ever_online
  AND starts_at >= %(window_from)s AND ends_at <= %(window_to)s
  -- implied (a plan ends at or after its start), but it bounds the index range: a sparse
  -- window never scans the plans that start after it.
  AND starts_at <= %(window_to)s
  AND (starts_at, id) > (%(after_start)s::timestamptz, %(after_id)s::bigint)
ORDER BY starts_at, id
LIMIT %(limit)s
