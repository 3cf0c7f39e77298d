-- Queue samples: what each queue held at a moment (jobs due now, scheduled, running, the
-- age of the oldest due job), taken every half minute by one housekeeping process, so
-- the console can draw depth, running and waiting age over time (the jobs table only
-- says what is true now). One row per sampling pass: a queue missing from ``queues``
-- held nothing then; a time with no row was not sampled. Kept about a day.

CREATE TABLE queue_samples (
    at      timestamptz PRIMARY KEY,
    -- {"<queue>": {"available": n, "scheduled": n, "running": n, "oldest_waiting_s": s}}
    queues  jsonb       NOT NULL CHECK (jsonb_typeof(queues) = 'object')
);
