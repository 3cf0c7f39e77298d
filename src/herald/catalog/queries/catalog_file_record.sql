-- Record an exported file; a retried export of the same version records it afresh.
INSERT INTO dataset_files (dataset_id, version, format, store_key, name, media_type,
                           byte_size, record_count, sha256)
VALUES (%(dataset_id)s, %(version)s, %(format)s, %(store_key)s, %(name)s, %(media_type)s,
        %(byte_size)s, %(record_count)s, %(sha256)s)
ON CONFLICT (dataset_id, version, format) DO UPDATE SET
    store_key = EXCLUDED.store_key,
    name = EXCLUDED.name,
    media_type = EXCLUDED.media_type,
    byte_size = EXCLUDED.byte_size,
    record_count = EXCLUDED.record_count,
    sha256 = EXCLUDED.sha256,
    created_at = herald_now()
RETURNING *
