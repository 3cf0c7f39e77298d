-- Declare a run; an explicit id may be given (replaying a documented trace). A run reads
-- its input manifests, or the live source it names (the catalog's exports).
INSERT INTO gen_runs (id, dataset, purpose, definition_version, manifest_ids, partitions,
                      intent, policy, base_generations, requested_by, reason, backfill_id,
                      rebased_from, live_source)
VALUES (coalesce(%(id)s, nextval(pg_get_serial_sequence('gen_runs', 'id'))),
        %(dataset)s, %(purpose)s, %(definition_version)s, %(manifest_ids)s, %(partitions)s,
        %(intent)s, %(policy)s, %(base_generations)s, %(requested_by)s, %(reason)s,
        %(backfill_id)s, %(rebased_from)s, %(live_source)s)
RETURNING *
