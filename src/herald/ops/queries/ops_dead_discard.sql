DELETE FROM dead_letters WHERE id = %(id)s RETURNING id
