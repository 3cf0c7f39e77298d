-- Claim slots to fire, several schedules at once. A slot already in the ledger is not
-- returned: it was fired before and must not be enqueued again.
INSERT INTO schedule_fires (schedule_id, slot, coalesced)
SELECT * FROM unnest(%(schedule_ids)s::bigint[], %(slots)s::timestamptz[],
                     %(coalesced)s::integer[])
ORDER BY 1, 2
ON CONFLICT ON CONSTRAINT schedule_fires_once DO NOTHING
RETURNING id, schedule_id, slot
