INSERT INTO gen_subscriptions (name, url, secret, datasets, created_by)
VALUES (%(name)s, %(url)s, %(secret)s, %(datasets)s, %(created_by)s)
RETURNING id, name, url, datasets, active, created_by, created_at
