SELECT * FROM gen_candidates WHERE id = %(id)s
