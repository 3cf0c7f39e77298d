-- Versions that failed or were deleted in the last day: no file of theirs may remain
-- (a writer that lost its lease can still have committed one after the cleanup).
SELECT dataset_id, version FROM dataset_versions
WHERE state IN ('failed', 'deleted') AND updated_at > herald_now() - interval '1 day'
ORDER BY dataset_id, version
