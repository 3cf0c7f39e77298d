-- Replace the configured top-level fields of dead letters' payloads and checkpoints
-- (cleanup) with the redaction mark; only rows that still hold one of them change.
WITH marked AS (
    SELECT d.id,
           (SELECT coalesce(jsonb_object_agg(k, to_jsonb(%(mark)s::text)), '{}')
            FROM unnest(%(fields)s::text[]) k
            WHERE jsonb_typeof(d.payload) = 'object' AND d.payload ? k
              AND d.payload -> k <> to_jsonb(%(mark)s::text)) AS payload,
           (SELECT coalesce(jsonb_object_agg(k, to_jsonb(%(mark)s::text)), '{}')
            FROM unnest(%(fields)s::text[]) k
            WHERE jsonb_typeof(d.cleanup) = 'object' AND d.cleanup ? k
              AND d.cleanup -> k <> to_jsonb(%(mark)s::text)) AS cleanup
    FROM dead_letters d
    WHERE d.payload ?| %(fields)s::text[] OR d.cleanup ?| %(fields)s::text[]
)
UPDATE dead_letters d
SET payload = CASE WHEN m.payload = '{}' THEN d.payload ELSE d.payload || m.payload END,
    cleanup = CASE WHEN m.cleanup = '{}' THEN d.cleanup ELSE d.cleanup || m.cleanup END
FROM marked m
WHERE d.id = m.id AND (m.payload <> '{}' OR m.cleanup <> '{}')
RETURNING d.id
