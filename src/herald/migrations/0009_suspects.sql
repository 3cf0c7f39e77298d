-- Poison isolation. A job whose lease expired is a suspect: it may be what killed (or
-- froze) its worker. A worker holds at most one suspect at a time, so a later expiry of
-- a suspect's lease can be charged to it; the first expiry of a job that was not a
-- suspect is not charged (its worker may have died of a neighbour). Cleared when an
-- attempt ends by itself (the handler returned or raised).
ALTER TABLE jobs ADD COLUMN suspect boolean NOT NULL DEFAULT false;
-- only a job still to run (or running) can be a suspect.
ALTER TABLE jobs ADD CONSTRAINT suspect_only_active
    CHECK (NOT suspect OR state IN ('waiting', 'running'));

-- Whether the expiry cost the job an attempt (false: refunded, the job was not a suspect).
ALTER TABLE rescues ADD COLUMN charged boolean NOT NULL DEFAULT true;
