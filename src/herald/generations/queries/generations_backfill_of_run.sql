SELECT b.* FROM gen_backfills b JOIN gen_runs r ON r.backfill_id = b.id WHERE r.id = %(run_id)s
