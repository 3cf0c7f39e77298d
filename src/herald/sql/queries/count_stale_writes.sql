SELECT count(*) AS n FROM stale_writes WHERE (%(job_id)s::bigint IS NULL OR job_id = %(job_id)s)
