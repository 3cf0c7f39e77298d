SELECT id, version FROM jobs
WHERE kind = %(kind)s AND key = %(key)s AND state IN ('waiting', 'running')
