UPDATE gen_quarantine
SET state = %(state)s, resolved_by = %(actor)s, resolution = %(reason)s,
    resolved_at = herald_now()
WHERE id = %(id)s AND state = 'held'
RETURNING *
