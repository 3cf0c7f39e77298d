DELETE FROM idempotency_keys
WHERE key IN (SELECT key FROM idempotency_keys WHERE expires_at <= herald_now()
              LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
