INSERT INTO gen_outbox (publication_id, dataset, event_type, payload)
VALUES (%(publication_id)s, %(dataset)s, %(event_type)s, %(payload)s)
RETURNING *
