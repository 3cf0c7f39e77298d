-- A run left fetching by an attempt that is gone (the caller holds the provider's fetch
-- lock, so no live fetcher owns it) fails: its rows never become processable.
UPDATE ingest_runs
SET state = 'failed', finished_at = herald_now(), error = %(error)s
WHERE provider = %(provider)s AND state = 'fetching'
RETURNING id
