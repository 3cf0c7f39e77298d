-- Store a subscription's secret sealed under the newest key.
UPDATE gen_subscriptions SET secret = %(secret)s WHERE id = %(id)s
