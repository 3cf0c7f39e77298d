-- Held items past their expiry leave the quarantine; their redacted sample is dropped.
UPDATE gen_quarantine SET state = 'expired', sample = NULL, resolved_at = herald_now()
WHERE state = 'held' AND expires_at <= herald_now()
RETURNING id
