SELECT id, kind, payload FROM dead_letters WHERE id = %(id)s
