-- Forget a version's files once the export store has deleted them.
DELETE FROM dataset_files WHERE dataset_id = %(dataset_id)s AND version = %(version)s
RETURNING store_key
