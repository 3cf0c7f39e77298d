-- Record an input manifest; its raw bytes are retained for the dataset's raw_retention.
INSERT INTO gen_input_manifests (dataset, source, owner, schema_version, location, checksum,
                                 event_time_from, event_time_to, record_count, partitions,
                                 retain_until)
SELECT %(dataset)s, %(source)s, %(owner)s, %(schema_version)s, %(location)s, %(checksum)s,
       %(event_time_from)s, %(event_time_to)s, %(record_count)s, %(partitions)s,
       herald_now() + d.raw_retention
FROM gen_datasets d WHERE d.name = %(dataset)s
RETURNING *
