-- Token buckets unused for longer than the retention and full again by now: a bucket
-- created afresh starts full too, so deleting one changes no decision (its grant and
-- wait counters go with it). The conditions are on the row itself, so a taker that
-- updates the bucket meanwhile makes the delete skip it.
DELETE FROM rate_limits b
WHERE b.key IN (
        SELECT key FROM rate_limits
        WHERE updated_at < herald_now() - make_interval(secs => %(retention_s)s)
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED)
  AND b.updated_at < herald_now() - make_interval(secs => %(retention_s)s)
  AND b.tokens + b.rate * extract(epoch FROM herald_now() - b.updated_at)::float8 >= b.burst
