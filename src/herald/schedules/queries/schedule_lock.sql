-- One schedule, locked for a manual change (waits for a scheduler holding it).
SELECT * FROM schedules WHERE id = %(id)s FOR UPDATE
