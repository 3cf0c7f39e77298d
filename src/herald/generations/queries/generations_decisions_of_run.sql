SELECT * FROM gen_decisions WHERE run_id = %(run_id)s ORDER BY id
