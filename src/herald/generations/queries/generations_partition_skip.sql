-- An operator settles a task that has not produced a candidate (its job is cancelled).
UPDATE gen_run_partitions SET state = 'discarded', detail = %(detail)s, updated_at = herald_now()
WHERE run_id = %(run_id)s AND partition = %(partition)s AND state IN ('queued', 'building')
RETURNING *
