SELECT d.*, s.name AS subscription, s.url, s.secret, s.active, o.event_id, o.event_type, o.payload, o.created_at
FROM gen_deliveries d
JOIN gen_subscriptions s ON s.id = d.subscription_id
JOIN gen_outbox o ON o.id = d.outbox_id
WHERE d.id = %(id)s
