-- A bounded batch of due, unpaused schedules, locked for this transaction. Rows another
-- scheduler holds are skipped, so several schedulers share the backlog.
SELECT s.*, herald_now() AS now
FROM schedules s
WHERE NOT s.paused AND s.next_due_at <= herald_now()
ORDER BY s.next_due_at, s.id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
