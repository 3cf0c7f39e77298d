-- Hold input that failed deterministically, within the dataset's cap: nothing is inserted
-- (and the caller refuses the input) when the quarantine is full. Expiry from the
-- dataset's quarantine_ttl.
INSERT INTO gen_quarantine (dataset, manifest_id, run_id, partition, owner, reason_code,
                            detail, sample, redacted_fields, expires_at)
SELECT d.name, %(manifest_id)s, %(run_id)s, %(partition)s, %(owner)s, %(reason_code)s,
       %(detail)s, %(sample)s, d.redacted_fields, herald_now() + d.quarantine_ttl
FROM gen_datasets d
WHERE d.name = %(dataset)s
  AND (SELECT count(*) FROM gen_quarantine q
       WHERE q.dataset = d.name AND q.state = 'held') < d.quarantine_cap
RETURNING *
