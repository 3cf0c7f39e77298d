-- After a pass over several schedules: each one's new next due time and what the pass
-- fired, coalesced or skipped for it.
UPDATE schedules s
SET next_due_at = r.next_due_at,
    last_slot = coalesce(r.last_slot, s.last_slot),
    last_fired_at = CASE WHEN r.fired > 0 THEN herald_now() ELSE s.last_fired_at END,
    last_job_id = coalesce(r.last_job_id, s.last_job_id),
    last_outcome = coalesce(r.last_outcome, s.last_outcome),
    last_error = NULL,
    fired_count = s.fired_count + r.fired,
    coalesced_count = s.coalesced_count + r.coalesced,
    last_coalesced = CASE WHEN r.fired > 0 THEN r.coalesced ELSE s.last_coalesced END,
    skipped_count = s.skipped_count + r.skipped
FROM unnest(%(ids)s::bigint[], %(next_due_ats)s::timestamptz[], %(last_slots)s::timestamptz[],
            %(last_job_ids)s::bigint[], %(last_outcomes)s::text[], %(fired)s::integer[],
            %(coalesced)s::integer[], %(skipped)s::integer[])
     AS r (id, next_due_at, last_slot, last_job_id, last_outcome, fired, coalesced, skipped)
WHERE s.id = r.id
