SELECT * FROM dataset_versions WHERE dataset_id = %(dataset_id)s ORDER BY version DESC
