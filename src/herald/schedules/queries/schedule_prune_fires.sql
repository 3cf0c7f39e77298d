-- Forget fired slots long past. A slot lies before its schedule's next_due_at once
-- fired, so an old record no longer guards anything.
DELETE FROM schedule_fires
WHERE id IN (
    SELECT f.id FROM schedule_fires f
    JOIN schedules s ON s.id = f.schedule_id
    WHERE f.fired_at < herald_now() - make_interval(secs => %(retention_s)s)
      AND f.slot < s.next_due_at
    ORDER BY f.fired_at
    LIMIT %(limit)s
)
