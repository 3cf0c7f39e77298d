INSERT INTO gen_backfills (dataset, source_from, source_to, definition_version, partitions,
                           policy, intent, expected_cost, writes_per_second, concurrency,
                           requested_by, reason)
VALUES (%(dataset)s, %(source_from)s, %(source_to)s, %(definition_version)s, %(partitions)s,
        %(policy)s, %(intent)s, %(expected_cost)s, %(writes_per_second)s, %(concurrency)s,
        %(requested_by)s, %(reason)s)
RETURNING *
