SELECT * FROM dataset_versions
WHERE dataset_id = %(dataset_id)s AND state IN ('requested', 'exporting', 'exported')
