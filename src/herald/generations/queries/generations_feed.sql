-- The consumers' feed: events after a position, oldest first (at-least-once, by id).
SELECT id AS position, event_id, publication_id, dataset, event_type, payload, created_at
FROM gen_outbox
WHERE id > %(after)s AND (%(dataset)s::text IS NULL OR dataset = %(dataset)s)
ORDER BY id LIMIT %(limit)s
