-- Versions published in the last day, each with the files it keeps: any other file under
-- its folder is an attempt's output that was never registered (an orphan).
SELECT v.dataset_id, v.version,
       coalesce(array_agg(f.store_key) FILTER (WHERE f.store_key IS NOT NULL), '{}') AS keys
FROM dataset_versions v
LEFT JOIN dataset_files f ON f.dataset_id = v.dataset_id AND f.version = v.version
WHERE v.state = 'published' AND v.updated_at > herald_now() - interval '1 day'
GROUP BY v.dataset_id, v.version
ORDER BY v.dataset_id, v.version
