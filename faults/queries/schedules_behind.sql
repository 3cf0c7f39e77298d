SELECT count(*) AS n FROM schedules WHERE next_due_at <= herald_now()
