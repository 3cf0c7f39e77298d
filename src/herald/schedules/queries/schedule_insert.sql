-- Create one schedule; next_due_at was computed from its rule and herald_now().
INSERT INTO schedules (kind, key, payload, queue, priority, frequency, timezone, at_time,
                       weekday, day_of_month, cron, misfire, misfire_grace_s, max_catchup,
                       paused, next_due_at)
VALUES (%(kind)s, %(key)s, %(payload)s::jsonb, %(queue)s, %(priority)s, %(frequency)s,
        %(timezone)s, %(at_time)s, %(weekday)s, %(day_of_month)s, %(cron)s, %(misfire)s,
        %(misfire_grace_s)s, %(max_catchup)s, %(paused)s, %(next_due_at)s)
RETURNING *
