-- Malformed records of a run, kept for the operator until they expire.
INSERT INTO ingest_quarantine (run_id, provider, reason, raw, truncated, byte_offset, line, expires_at)
SELECT %(run_id)s, %(provider)s, q.reason, q.raw, q.truncated, q.byte_offset, q.line,
       herald_now() + make_interval(secs => %(keep_s)s)
FROM unnest(%(reasons)s::text[], %(raws)s::text[], %(truncated)s::boolean[],
            %(offsets)s::bigint[], %(lines)s::integer[])
     AS q(reason, raw, truncated, byte_offset, line)
