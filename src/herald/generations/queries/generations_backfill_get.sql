SELECT * FROM gen_backfills WHERE id = %(id)s
