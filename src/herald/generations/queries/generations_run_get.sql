SELECT * FROM gen_runs WHERE id = %(id)s
