-- One audit record; the table's CHECKs refuse an empty actor or reason.
INSERT INTO audit_log (actor, action, target_type, target_id, reason, before, after)
VALUES (%(actor)s, %(action)s, %(target_type)s, %(target_id)s, %(reason)s,
        %(before)s::jsonb, %(after)s::jsonb)
RETURNING id, at, actor, action, target_type, target_id, reason, before, after
