-- Take or renew the leases of the named duties for one holder; the answer names the
-- duties it holds now (those held by someone else under a live lease are left alone).
INSERT INTO duties AS d (name, holder, expires_at, acquired_at)
SELECT name, %(holder)s, herald_now() + make_interval(secs => %(lease_s)s), herald_now()
FROM unnest(%(names)s::text[]) AS n(name)
ON CONFLICT (name) DO UPDATE SET
    holder = EXCLUDED.holder,
    expires_at = EXCLUDED.expires_at,
    acquired_at = CASE WHEN d.holder = EXCLUDED.holder THEN d.acquired_at
                       ELSE EXCLUDED.acquired_at END
WHERE d.holder = EXCLUDED.holder OR d.expires_at <= herald_now()
RETURNING name
