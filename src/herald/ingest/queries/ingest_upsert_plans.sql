-- Process staged rows: upsert their plans and mark them done, in one statement. The rows
-- are either pending ones this transaction locked (claimed = false: the fast path, the
-- attempt counts here) or ones still claimed under this claim token (claimed = true: a
-- row requeued and claimed by another worker is not this worker's any more). The update
-- applies a snapshot's values only when it is not older than what is stored (last_seen_at);
-- ever_online only ever becomes true; first_seen_at keeps the earliest snapshot. So
-- repeated, retried and out-of-order snapshots converge on the same row.
WITH batch AS (
    SELECT s.id, s.base_plan_id, s.plan_id, s.title, s.starts_at, s.ends_at, s.sell_mode,
           s.online, s.min_price, s.max_price, s.zones, r.provider, r.snapshot_at
    FROM ingest_staged s JOIN ingest_runs r ON r.id = s.run_id
    WHERE s.id = ANY(%(ids)s::bigint[])
      AND CASE WHEN %(claimed)s THEN s.state = 'processing' AND s.claimed_by = %(token)s
               ELSE s.state = 'pending' END
    FOR UPDATE OF s
), latest AS (
    -- A plan repeated within a batch: its last occurrence in the document wins.
    SELECT DISTINCT ON (provider, base_plan_id, plan_id) *
    FROM batch ORDER BY provider, base_plan_id, plan_id, id DESC
), upserted AS (
    INSERT INTO ingest_plans AS p (
        provider, base_plan_id, plan_id, title, starts_at, ends_at, sell_mode, ever_online,
        min_price, max_price, zones, first_seen_at, last_seen_at
    )
    SELECT provider, base_plan_id, plan_id, title, starts_at, ends_at, sell_mode, online,
           min_price, max_price, zones, snapshot_at, snapshot_at
    FROM latest
    ORDER BY provider, base_plan_id, plan_id
    ON CONFLICT (tenant_id, provider, base_plan_id, plan_id) DO UPDATE SET
        title = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.title ELSE p.title END,
        starts_at = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.starts_at ELSE p.starts_at END,
        ends_at = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.ends_at ELSE p.ends_at END,
        sell_mode = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.sell_mode ELSE p.sell_mode END,
        min_price = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.min_price ELSE p.min_price END,
        max_price = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.max_price ELSE p.max_price END,
        zones = CASE WHEN EXCLUDED.last_seen_at >= p.last_seen_at THEN EXCLUDED.zones ELSE p.zones END,
        ever_online = p.ever_online OR EXCLUDED.ever_online,
        first_seen_at = least(p.first_seen_at, EXCLUDED.first_seen_at),
        last_seen_at = greatest(p.last_seen_at, EXCLUDED.last_seen_at)
    -- Nothing to change: leave the row alone (no dead tuple, no invalidation).
    WHERE EXCLUDED.last_seen_at > p.last_seen_at
       OR (EXCLUDED.ever_online AND NOT p.ever_online)
       OR EXCLUDED.first_seen_at < p.first_seen_at
       OR (EXCLUDED.last_seen_at = p.last_seen_at
           AND (p.title, p.starts_at, p.ends_at, p.sell_mode, p.zones)
               IS DISTINCT FROM (EXCLUDED.title, EXCLUDED.starts_at, EXCLUDED.ends_at,
                                 EXCLUDED.sell_mode, EXCLUDED.zones))
    RETURNING p.starts_at, p.ends_at
), done AS (
    UPDATE ingest_staged s
    SET state = 'done', claimed_at = NULL, claimed_by = %(token)s,
        attempts = s.attempts + CASE WHEN %(claimed)s THEN 0 ELSE 1 END
    FROM batch b WHERE s.id = b.id
    RETURNING s.id
)
SELECT (SELECT count(*) FROM done) AS done,
       (SELECT count(*) FROM upserted) AS changed,
       (SELECT min(starts_at) FROM upserted) AS changed_from,
       (SELECT max(ends_at) FROM upserted) AS changed_to
