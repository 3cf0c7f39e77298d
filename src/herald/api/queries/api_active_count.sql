SELECT count(*) AS n
FROM api_submissions s JOIN jobs j ON j.id = s.job_id
WHERE s.api_key_id = %(key_id)s AND j.state IN ('waiting', 'running')
