-- One quarantined item as an action's review reads it (no lock: nothing changes yet).
SELECT id, dataset, manifest_id, run_id, partition, owner, reason_code, detail, state,
       quarantined_at, expires_at
FROM gen_quarantine WHERE id = %(id)s
