-- Every subscription's stored secret, locked for re-sealing (herald.generations.secrets).
SELECT id, name, secret FROM gen_subscriptions ORDER BY id FOR UPDATE
