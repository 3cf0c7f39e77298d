-- Replace a schedule's definition (validated by the caller) and its next due time.
UPDATE schedules
SET payload = %(payload)s::jsonb, queue = %(queue)s, priority = %(priority)s,
    frequency = %(frequency)s, timezone = %(timezone)s, at_time = %(at_time)s,
    weekday = %(weekday)s, day_of_month = %(day_of_month)s, cron = %(cron)s,
    misfire = %(misfire)s, misfire_grace_s = %(misfire_grace_s)s,
    max_catchup = %(max_catchup)s, next_due_at = %(next_due_at)s, updated_at = herald_now()
WHERE id = %(id)s
RETURNING *
