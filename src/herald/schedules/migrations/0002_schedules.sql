-- Recurring schedules: one object (kind + key + payload) enqueued on a recurrence in a
-- named time zone. The scheduler takes due rows with SKIP LOCKED, enqueues, and moves
-- next_due_at forward from the originally scheduled slot (never from "now": no drift).

CREATE TABLE schedules (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind <> '' AND length(kind) <= 200),
    key              text        NOT NULL CHECK (key <> '' AND length(key) <= 1000),
    payload          jsonb       NOT NULL DEFAULT '{}',
    queue            text        CHECK (queue <> '' AND length(queue) <= 200),
    priority         smallint,
    frequency        text        NOT NULL CHECK (frequency IN ('daily', 'weekly', 'monthly', 'cron')),
    timezone         text        NOT NULL CHECK (timezone <> '' AND length(timezone) <= 100),
    at_time          time without time zone,
    weekday          smallint    CHECK (weekday BETWEEN 1 AND 7),   -- ISO: 1 = Monday
    day_of_month     smallint    CHECK (day_of_month BETWEEN 1 AND 31),
    cron             text        CHECK (cron <> '' AND length(cron) <= 200),
    misfire          text        NOT NULL DEFAULT 'once' CHECK (misfire IN ('once', 'skip', 'all')),
    misfire_grace_s  double precision NOT NULL DEFAULT 60 CHECK (misfire_grace_s >= 0),
    max_catchup      integer     NOT NULL DEFAULT 10 CHECK (max_catchup BETWEEN 1 AND 1000),
    paused           boolean     NOT NULL DEFAULT false,
    next_due_at      timestamptz NOT NULL,
    last_slot        timestamptz,
    last_fired_at    timestamptz,
    last_job_id      bigint,
    last_outcome     text,
    last_error       text,
    fired_count      bigint      NOT NULL DEFAULT 0 CHECK (fired_count >= 0),
    -- slots folded into one catch-up fire (misfire = once), in total and at the last fire.
    coalesced_count  bigint      NOT NULL DEFAULT 0 CHECK (coalesced_count >= 0),
    last_coalesced   integer     NOT NULL DEFAULT 0 CHECK (last_coalesced >= 0),
    -- slots passed over without firing (misfire = skip).
    skipped_count    bigint      NOT NULL DEFAULT 0 CHECK (skipped_count >= 0),
    -- passes whose fire failed (last_error says why); their due slots were passed over.
    failed_count     bigint      NOT NULL DEFAULT 0 CHECK (failed_count >= 0),
    created_at       timestamptz NOT NULL DEFAULT herald_now(),
    updated_at       timestamptz NOT NULL DEFAULT herald_now(),

    CONSTRAINT schedules_payload_is_object CHECK (jsonb_typeof(payload) = 'object'),
    -- each frequency carries exactly the fields it uses.
    CONSTRAINT schedules_rule_shape CHECK (
        CASE frequency
            WHEN 'daily' THEN at_time IS NOT NULL AND weekday IS NULL
                              AND day_of_month IS NULL AND cron IS NULL
            WHEN 'weekly' THEN at_time IS NOT NULL AND weekday IS NOT NULL
                               AND day_of_month IS NULL AND cron IS NULL
            WHEN 'monthly' THEN at_time IS NOT NULL AND weekday IS NULL
                                AND day_of_month IS NOT NULL AND cron IS NULL
            WHEN 'cron' THEN at_time IS NULL AND weekday IS NULL
                             AND day_of_month IS NULL AND cron IS NOT NULL
        END
    )
);

-- The scheduler's scan: due, unpaused, oldest first.
CREATE INDEX schedules_due ON schedules (next_due_at, id) WHERE NOT paused;
CREATE INDEX schedules_object ON schedules (kind, key);

-- Every slot fired, written in the same transaction as the enqueue: a slot can be fired
-- once only, whatever number of schedulers run.
CREATE TABLE schedule_fires (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id  bigint      NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    slot         timestamptz NOT NULL,
    fired_at     timestamptz NOT NULL DEFAULT herald_now(),
    job_id       bigint,
    outcome      text        CHECK (outcome IN ('created', 'in_progress', 'replay')),
    coalesced    integer     NOT NULL DEFAULT 0 CHECK (coalesced >= 0),
    CONSTRAINT schedule_fires_once UNIQUE (schedule_id, slot)
);
CREATE INDEX schedule_fires_age ON schedule_fires (fired_at);
