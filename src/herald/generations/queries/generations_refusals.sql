SELECT * FROM gen_decisions WHERE job_id = %(job_id)s AND decision = 'refuse' ORDER BY id
