-- Subscriptions of a dataset with where their deliveries of one partition stand.
SELECT s.id, s.name, s.url, s.active,
       count(d.id) FILTER (WHERE d.state = 'delivered') AS delivered,
       count(d.id) FILTER (WHERE d.state = 'pending') AS pending,
       count(d.id) FILTER (WHERE d.state = 'failed') AS failed
FROM gen_subscriptions s
LEFT JOIN (gen_deliveries d JOIN gen_outbox o
           ON o.id = d.outbox_id AND o.payload ->> 'partition' = %(partition)s)
       ON d.subscription_id = s.id
WHERE %(dataset)s = ANY(s.datasets)
GROUP BY s.id ORDER BY s.id
