UPDATE gen_backfills SET run_id = %(run_id)s WHERE id = %(id)s AND run_id IS NULL RETURNING *
