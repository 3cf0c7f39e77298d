SELECT * FROM dataset_files
WHERE dataset_id = %(dataset_id)s AND version = %(version)s
ORDER BY format
