SELECT * FROM schedules
WHERE (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(key)s::text IS NULL OR key = %(key)s)
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s)
  AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s)
ORDER BY id
LIMIT %(limit)s
