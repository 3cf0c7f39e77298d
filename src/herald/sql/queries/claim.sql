-- Claim a batch: owner, lease, attempt and fence move in one atomic update.
-- Each (queue, tenant) is read in claim order from its own slice of the claim index (an
-- ordered index scan that stops after `limit` rows). Tenants take turns: each tenant's
-- candidates are ranked in claim order and the batch takes every tenant's first, then
-- every tenant's second..., so one tenant's backlog or retry storm cannot keep another's
-- due jobs waiting behind it (within a tenant, priority, run_at, id as before).
-- The clock is read once (MATERIALIZED), not evaluated again for every row.
-- Only kinds this worker knows are claimed: during a rolling deploy an older worker
-- leaves a new kind's jobs to the workers that can run them.
-- Poison isolation: the batch holds at most `suspects` suspects (strikes = 2), 0 or 1: a
-- worker holds one suspect at a time, so the death of its worker can be charged to it.
-- Run for the platform (every tenant), whose policy short-circuits row-level security.
-- The rows to update are looked up by primary key (id = ANY of the batch): the claim keeps
-- one generic plan, which cannot know `limit` and guessed a batch large enough to
-- hash-join a sequential scan of the whole jobs table (read on every claim, at depth).
WITH clock AS MATERIALIZED (SELECT herald_now() AS now), candidates AS (
    SELECT c.id, c.priority, c.run_at, c.tenant_id,
           row_number() OVER (PARTITION BY c.strikes = 2
                              ORDER BY c.priority DESC, c.run_at, c.id) AS nth,
           c.strikes = 2 AS suspect
    FROM unnest(%(queues)s::text[]) AS q(name)
    CROSS JOIN tenants t
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at, strikes, tenant_id FROM jobs
        WHERE state = 'waiting' AND queue = q.name AND tenant_id = t.id
          AND run_at <= herald_now()
          AND kind = ANY(%(kinds)s::text[])
          AND (strikes < 2 OR %(suspects)s::int > 0)
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) c
), eligible AS (
    SELECT id, priority, run_at,
           row_number() OVER (PARTITION BY tenant_id
                              ORDER BY priority DESC, run_at, id) AS turn
    FROM candidates
    WHERE NOT suspect OR nth <= %(suspects)s::int
), next AS (
    SELECT id FROM eligible
    ORDER BY turn, priority DESC, run_at, id
    LIMIT %(limit)s
)
UPDATE jobs j
SET state = 'running',
    attempt = j.attempt + 1,
    fence = j.fence + 1,
    lease_owner = %(owner)s,
    lease_expires_at = clk.now + make_interval(secs => %(lease_s)s),
    attempted_at = clk.now
FROM clock clk
WHERE j.id = ANY (ARRAY(SELECT id FROM next))
RETURNING j.id, j.kind, j.queue, j.key, j.version, j.payload, j.priority, j.attempt,
          j.max_attempts, j.fence, j.step, j.checkpoint, j.strikes = 2 AS suspect, j.tenant_id
