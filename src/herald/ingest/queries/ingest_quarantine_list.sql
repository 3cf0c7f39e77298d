SELECT id, run_id, provider, reason, raw, truncated, byte_offset, line, created_at, expires_at
FROM ingest_quarantine
WHERE (%(provider)s::text IS NULL OR provider = %(provider)s)
  AND (%(run_id)s::bigint IS NULL OR run_id = %(run_id)s)
  AND expires_at > herald_now()
ORDER BY id DESC
LIMIT %(limit)s
