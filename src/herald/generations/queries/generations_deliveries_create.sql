-- One pending delivery per active subscription of the event's dataset.
INSERT INTO gen_deliveries (subscription_id, outbox_id)
SELECT s.id, %(outbox_id)s FROM gen_subscriptions s
WHERE s.active AND %(dataset)s = ANY(s.datasets)
ON CONFLICT (subscription_id, outbox_id) DO NOTHING
RETURNING id
