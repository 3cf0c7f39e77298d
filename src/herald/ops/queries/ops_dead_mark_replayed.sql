UPDATE dead_letters SET replayed_job_id = %(job_id)s WHERE id = %(id)s
RETURNING id, replayed_job_id
