-- The figures the console's overview shows beside the queues.
SELECT (SELECT herald_now()) AS now,
       (SELECT count(*) FROM dead_letters) AS dead_letters,
       (SELECT count(*) FROM dead_letters WHERE cleanup_state = 'pending') AS cleanup_pending,
       (SELECT count(*) FROM dead_letters
        WHERE cleanup_state = 'pending' AND cleanup_attempts > 0) AS cleanup_failing,
       (SELECT count(*) FROM stale_writes
        WHERE at >= herald_now() - make_interval(secs => %(window_s)s)) AS stale_writes,
       (SELECT count(*) FROM rescues
        WHERE at >= herald_now() - make_interval(secs => %(window_s)s)) AS rescues,
       (SELECT count(*) FROM schedules WHERE paused) AS schedules_paused,
       (SELECT count(*) FROM schedules
        WHERE NOT paused AND next_due_at < herald_now()) AS schedules_overdue
