-- The jobs claimed slots enqueued (or found already in progress).
UPDATE schedule_fires f
SET job_id = r.job_id, outcome = r.outcome
FROM unnest(%(ids)s::bigint[], %(job_ids)s::bigint[], %(outcomes)s::text[])
     AS r (id, job_id, outcome)
WHERE f.id = r.id
