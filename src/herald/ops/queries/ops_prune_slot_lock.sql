-- Take the slot-takers' lock of each key that is free now (see ops_concurrency_lock);
-- keys whose takers are busy are left for the next pass. Held to the end of the
-- transaction, so the next statement's snapshot sees every taker committed before us.
SELECT k.key
FROM unnest(%(keys)s::text[]) AS k(key)
WHERE pg_try_advisory_xact_lock(hashtextextended('herald.concurrency.' || k.key, 0))
