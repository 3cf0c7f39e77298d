-- Webhook deliveries of a partition's publication events, newest first.
SELECT d.id, d.state, d.attempts, d.last_status, d.last_error, d.delivered_at,
       s.name AS subscription, s.url, o.event_id, o.event_type, o.created_at,
       o.payload ->> 'generation' AS generation
FROM gen_deliveries d
JOIN gen_subscriptions s ON s.id = d.subscription_id
JOIN gen_outbox o ON o.id = d.outbox_id
WHERE o.dataset = %(dataset)s AND o.payload ->> 'partition' = %(partition)s
ORDER BY d.id DESC
LIMIT %(limit)s
