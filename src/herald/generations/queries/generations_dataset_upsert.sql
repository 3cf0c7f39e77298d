-- Register a generations dataset, or update what its publications must satisfy.
INSERT INTO gen_datasets (name, owner, schema_version, fields, min_rows, max_rows,
                          quality_rules, raw_retention, quarantine_cap, quarantine_ttl,
                          redacted_fields)
VALUES (%(name)s, %(owner)s, %(schema_version)s, %(fields)s, %(min_rows)s, %(max_rows)s,
        %(quality_rules)s, make_interval(secs => %(raw_retention_s)s), %(quarantine_cap)s,
        make_interval(secs => %(quarantine_ttl_s)s), %(redacted_fields)s)
ON CONFLICT (name) DO UPDATE SET
    owner = EXCLUDED.owner, schema_version = EXCLUDED.schema_version,
    fields = EXCLUDED.fields, min_rows = EXCLUDED.min_rows, max_rows = EXCLUDED.max_rows,
    quality_rules = EXCLUDED.quality_rules, raw_retention = EXCLUDED.raw_retention,
    quarantine_cap = EXCLUDED.quarantine_cap, quarantine_ttl = EXCLUDED.quarantine_ttl,
    redacted_fields = EXCLUDED.redacted_fields
RETURNING *
