SELECT * FROM gen_quarantine WHERE id = %(id)s FOR UPDATE
