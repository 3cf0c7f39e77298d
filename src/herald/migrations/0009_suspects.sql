-- Poison isolation. `strikes` counts the lease expiries a job went through without being
-- charged for them, since its last attempt that ended by itself (cleared then):
--   0  clean;
--   1  its worker died (or froze) once while holding it: maybe a neighbour's fault;
--   2  a suspect: a worker holds at most one suspect at a time, so a later expiry of a
--      suspect's lease is charged to it (the claim and rescue statements say how).
ALTER TABLE jobs ADD COLUMN strikes smallint NOT NULL DEFAULT 0
    CHECK (strikes BETWEEN 0 AND 2);
-- only a job still to run (or running) carries strikes.
ALTER TABLE jobs ADD CONSTRAINT strikes_only_active
    CHECK (strikes = 0 OR state IN ('waiting', 'running'));

-- Whether the expiry cost the job an attempt (false: given back, it was not a suspect).
ALTER TABLE rescues ADD COLUMN charged boolean NOT NULL DEFAULT true;
