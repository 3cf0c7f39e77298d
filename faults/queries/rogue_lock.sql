-- A rogue client: lock these waiting rows and sit on them (no SKIP LOCKED, no timeout).
SELECT id FROM jobs WHERE id = ANY(%(ids)s::bigint[]) AND state = 'waiting' FOR UPDATE
