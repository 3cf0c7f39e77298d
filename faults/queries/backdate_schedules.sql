-- Make every schedule due since %(minutes)s minutes ago (a whole minute): each has that
-- many slots to fire, one by one (misfire 'all'), while its schedulers are being killed.
UPDATE schedules
SET next_due_at = date_trunc('minute', herald_now()) - make_interval(mins => %(minutes)s)
RETURNING id, extract(epoch FROM next_due_at)::float8 AS first_slot
