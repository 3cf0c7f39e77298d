-- Pause or resume. Resuming never catches up slots that fell due while paused: a past
-- next_due_at moves to the first slot after now (computed by the caller).
UPDATE schedules
SET paused = %(paused)s,
    next_due_at = CASE WHEN %(paused)s THEN next_due_at
                       ELSE greatest(next_due_at, %(resume_due_at)s::timestamptz) END,
    updated_at = herald_now()
WHERE id = %(id)s
RETURNING *
