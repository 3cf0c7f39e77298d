-- Plans ever online inside [starts_at, ends_at], after the cursor, in (start, id) order.
-- The lower bound is one row comparison, from the later of the window's start and the
-- cursor (ids start at 1, so (window start, 0) admits every plan starting at the
-- window's start), and the index range begins there. With a separate starts_at >= bound
-- beside the cursor's, the btree may start at the lower of the two and step over every
-- plan that starts before the window (or, on a later page, before the cursor): the
-- cost then grew with the table and with the window's date.
SELECT id, provider, base_plan_id, plan_id, title, starts_at, ends_at, min_price, max_price
FROM ingest_plans
WHERE ever_online
  AND (starts_at, id) > (
      greatest(%(after_start)s::timestamptz, %(window_from)s::timestamptz),
      CASE WHEN %(after_start)s::timestamptz >= %(window_from)s::timestamptz
           THEN %(after_id)s::bigint ELSE 0 END)
  AND ends_at <= %(window_to)s
  -- implied (a plan ends at or after its start), but it bounds the index range: a sparse
  -- window never scans the plans that start after it.
  AND starts_at <= %(window_to)s
ORDER BY starts_at, id
LIMIT %(limit)s
