-- A dataset's newest published versions (at most the limit), oldest first, with their
-- files and their run's source: what its entry links as the dataset's versions.
SELECT * FROM (
SELECT v.version, v.generation, v.run_id, v.record_count, v.created_at, v.published_at,
       r.live_source,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                        'key', f.store_key, 'name', f.name, 'format', f.format,
                        'byte_size', f.byte_size, 'record_count', f.record_count,
                        'sha256', f.sha256) ORDER BY f.format)
                 FROM dataset_files f
                 WHERE f.dataset_id = v.dataset_id AND f.version = v.version), '[]') AS files
FROM dataset_versions v JOIN gen_runs r ON r.id = v.run_id
WHERE v.dataset_id = %(dataset_id)s AND v.state = 'published'
ORDER BY v.version DESC
LIMIT %(limit)s
) newest
ORDER BY version
