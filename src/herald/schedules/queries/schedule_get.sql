SELECT * FROM schedules WHERE id = %(id)s
