UPDATE gen_candidates SET state = %(state)s WHERE id = %(id)s RETURNING *
