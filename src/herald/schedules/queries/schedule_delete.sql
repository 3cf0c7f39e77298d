DELETE FROM schedules WHERE id = %(id)s RETURNING *
