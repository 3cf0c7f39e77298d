-- Move a version to a new state, only from the states allowed to lead there; the given
-- details are kept when NULL is passed.
UPDATE dataset_versions SET
    state = %(state)s,
    record_count = COALESCE(%(record_count)s, record_count),
    columns = COALESCE(%(columns)s, columns),
    validation = COALESCE(%(validation)s, validation),
    metadata = COALESCE(%(metadata)s, metadata),
    error = CASE WHEN %(state)s = 'failed' THEN %(error)s ELSE COALESCE(%(error)s, error) END,
    published_at = CASE WHEN %(state)s = 'published' THEN herald_now() ELSE published_at END,
    deleted_at = CASE WHEN %(state)s = 'deleted' THEN herald_now() ELSE deleted_at END,
    updated_at = herald_now()
WHERE dataset_id = %(dataset_id)s AND version = %(version)s
  AND state = ANY(%(from_states)s::text[])
RETURNING *
