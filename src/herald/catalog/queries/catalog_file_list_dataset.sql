SELECT * FROM dataset_files WHERE dataset_id = %(dataset_id)s ORDER BY version DESC, format
