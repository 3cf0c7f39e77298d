-- A schedule that could not fire: its due slots are passed over with the reason kept,
-- so it cannot block the batch tick after tick. A rule with no slot left is paused.
UPDATE schedules
SET next_due_at = %(next_due_at)s,
    last_error = %(last_error)s,
    failed_count = failed_count + 1,
    paused = paused OR %(pause)s
WHERE id = %(id)s
