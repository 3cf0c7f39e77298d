-- Webhook deliveries, newest first, with their subscription and event.
SELECT d.id, d.state, d.attempts, d.last_status, d.last_error, d.delivered_at,
       s.name AS subscription, o.event_id, o.event_type, o.publication_id
FROM gen_deliveries d
JOIN gen_subscriptions s ON s.id = d.subscription_id
JOIN gen_outbox o ON o.id = d.outbox_id
ORDER BY d.id DESC LIMIT %(limit)s
