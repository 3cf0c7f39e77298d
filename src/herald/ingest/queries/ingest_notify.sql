-- Tell search caches which window of plans changed (delivered when the batch commits).
SELECT pg_notify('herald_ingest', json_build_object(
    'schema', current_schema(), 'from', %(changed_from)s::timestamptz,
    'to', %(changed_to)s::timestamptz)::text)
