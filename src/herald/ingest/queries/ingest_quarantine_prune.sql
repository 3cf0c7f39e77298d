DELETE FROM ingest_quarantine
WHERE id IN (SELECT id FROM ingest_quarantine WHERE expires_at <= herald_now() LIMIT %(limit)s)
