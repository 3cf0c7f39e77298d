INSERT INTO api_submissions (job_id, api_key_id) VALUES (%(job_id)s, %(key_id)s)
ON CONFLICT (job_id) DO NOTHING
