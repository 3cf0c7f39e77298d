-- One delivery attempt's outcome; a delivered delivery stays delivered.
UPDATE gen_deliveries
SET attempts = attempts + 1, last_status = %(status)s, last_error = %(error)s,
    state = CASE WHEN %(delivered)s THEN 'delivered'
                 WHEN %(final)s THEN 'failed' ELSE state END,
    delivered_at = CASE WHEN %(delivered)s THEN herald_now() ELSE delivered_at END
WHERE id = %(id)s AND state = 'pending'
RETURNING *
