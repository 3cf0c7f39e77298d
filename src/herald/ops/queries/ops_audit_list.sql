-- Newest first; before_id pages backwards through the log.
SELECT id, at, actor, action, target_type, target_id, reason, before, after
FROM audit_log
WHERE (%(target_type)s::text IS NULL OR target_type = %(target_type)s)
  AND (%(target_id)s::text IS NULL OR target_id = %(target_id)s)
  AND (%(actor)s::text IS NULL OR actor = %(actor)s)
  AND (%(action)s::text IS NULL OR action = %(action)s)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s)
ORDER BY id DESC
LIMIT %(limit)s
