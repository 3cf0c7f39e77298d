-- One quarantined item as an action's review reads it (no lock: nothing changes yet).
SELECT * FROM gen_quarantine WHERE id = %(id)s
