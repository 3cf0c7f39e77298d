-- Datasets as immutable generations (herald.generations, see docs/generations.md).
-- Input manifests, runs, output candidates, publications, the per-partition pointer,
-- the decisions the publication coordinator took, the outbox and webhook deliveries,
-- quarantine and declared backfills. Tasks are ordinary Herald jobs (attempt, lease,
-- fence, checkpoint): nothing here copies them.

-- Refuses any change to a row of an immutable record.
CREATE FUNCTION gen_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are immutable once written', TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END $$;

-- A dataset that is published as generations, with what its publications must satisfy.
CREATE TABLE gen_datasets (
    name            text    PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,99}$'),
    owner           text    NOT NULL CHECK (owner <> ''),
    schema_version  integer NOT NULL CHECK (schema_version >= 1),
    fields          text[]  NOT NULL CHECK (cardinality(fields) >= 1),
    min_rows        bigint  NOT NULL DEFAULT 0 CHECK (min_rows >= 0),
    max_rows        bigint  CHECK (max_rows IS NULL OR max_rows >= min_rows),
    -- quality rules: {"not_null": [...], "unique": [...], "min": {"field": n}}
    quality_rules   jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(quality_rules) = 'object'),
    raw_retention   interval NOT NULL DEFAULT '90 days' CHECK (raw_retention > '0'),
    -- quarantine bounds: how many held items, for how long, and which fields are redacted
    quarantine_cap  integer NOT NULL DEFAULT 1000 CHECK (quarantine_cap BETWEEN 1 AND 1000000),
    quarantine_ttl  interval NOT NULL DEFAULT '14 days' CHECK (quarantine_ttl > '0'),
    redacted_fields text[]  NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT herald_now()
);

-- What a source delivered: evidence of input, not truth. Immutable once written; the raw
-- bytes it names are retained until retain_until so a backfill can reread them.
CREATE TABLE gen_input_manifests (
    id              bigserial PRIMARY KEY,
    dataset         text      NOT NULL REFERENCES gen_datasets(name),
    source          text      NOT NULL CHECK (source <> ''),
    owner           text      NOT NULL CHECK (owner <> ''),
    schema_version  integer   NOT NULL CHECK (schema_version >= 1),
    location        text      NOT NULL UNIQUE CHECK (location <> ''),
    checksum        text      NOT NULL CHECK (checksum ~ '^sha256:[0-9a-f]{64}$'),
    event_time_from timestamptz NOT NULL,
    event_time_to   timestamptz NOT NULL,
    record_count    bigint    NOT NULL CHECK (record_count >= 0),
    partitions      text[]    NOT NULL CHECK (cardinality(partitions) >= 1),
    received_at     timestamptz NOT NULL DEFAULT herald_now(),
    retain_until    timestamptz NOT NULL,
    CONSTRAINT event_range_ordered CHECK (event_time_from <= event_time_to),
    CONSTRAINT retained_after_receipt CHECK (retain_until > received_at)
);
CREATE INDEX gen_input_manifests_partitions ON gen_input_manifests USING gin (partitions);
CREATE TRIGGER gen_input_manifests_immutable BEFORE UPDATE OR DELETE ON gen_input_manifests
    FOR EACH ROW EXECUTE FUNCTION gen_immutable();

-- A declared run: definition version, inputs, target partitions, what it may publish and
-- against which generations it was planned, and what to do if those are no longer current.
CREATE TABLE gen_runs (
    id                 bigserial PRIMARY KEY,
    dataset            text    NOT NULL REFERENCES gen_datasets(name),
    purpose            text    NOT NULL CHECK (purpose IN ('scheduled', 'repair', 'backfill')),
    definition_version text    NOT NULL CHECK (definition_version <> ''),
    manifest_ids       bigint[] NOT NULL CHECK (cardinality(manifest_ids) >= 1),
    partitions         text[]  NOT NULL CHECK (cardinality(partitions) >= 1),
    intent             text    NOT NULL CHECK (intent IN ('publish', 'dry_run')),
    policy             text    NOT NULL CHECK (policy IN ('wait', 'rebase', 'discard')),
    -- {partition: generation} as planned; 0 = the partition had no generation yet
    base_generations   jsonb   NOT NULL CHECK (jsonb_typeof(base_generations) = 'object'),
    state              text    NOT NULL DEFAULT 'running'
                       CHECK (state IN ('running', 'settled', 'cancelled')),
    requested_by       text    NOT NULL CHECK (requested_by <> ''),
    reason             text    NOT NULL CHECK (reason <> ''),
    backfill_id        bigint,
    rebased_from       bigint  REFERENCES gen_runs(id),
    created_at         timestamptz NOT NULL DEFAULT herald_now(),
    settled_at         timestamptz,
    CONSTRAINT settled_iff_not_running CHECK ((state = 'running') = (settled_at IS NULL)),
    CONSTRAINT backfill_runs_name_it CHECK ((purpose = 'backfill') = (backfill_id IS NOT NULL))
);

-- One task per (run, partition): the Herald job that builds it, and where it stands.
CREATE TABLE gen_run_partitions (
    run_id      bigint NOT NULL REFERENCES gen_runs(id),
    partition   text   NOT NULL CHECK (partition <> ''),
    job_id      bigint,
    state       text   NOT NULL DEFAULT 'queued' CHECK (state IN (
                    'queued', 'building', 'waiting', 'published', 'discarded', 'rejected',
                    'quarantined', 'failed', 'dry_run')),
    candidate_id bigint,
    detail      text,
    updated_at  timestamptz NOT NULL DEFAULT herald_now(),
    PRIMARY KEY (run_id, partition),
    -- a settled partition says why
    CONSTRAINT settled_has_detail CHECK (state IN ('queued', 'building') OR detail IS NOT NULL),
    CONSTRAINT candidate_states CHECK (
        state NOT IN ('waiting', 'published', 'dry_run') OR candidate_id IS NOT NULL)
);
CREATE INDEX gen_run_partitions_job ON gen_run_partitions (job_id);

-- Output written by one attempt to its own immutable location. Registered only by the
-- attempt holding the job's current fence (checked by the trigger below, in the same
-- transaction as the attempt's fenced completion).
CREATE TABLE gen_candidates (
    id             bigserial PRIMARY KEY,
    run_id         bigint  NOT NULL REFERENCES gen_runs(id),
    dataset        text    NOT NULL REFERENCES gen_datasets(name),
    partition      text    NOT NULL,
    job_id         bigint  NOT NULL,
    attempt        integer NOT NULL CHECK (attempt >= 1),
    fence          bigint  NOT NULL CHECK (fence >= 1),
    worker         text    NOT NULL,
    location       text    NOT NULL UNIQUE,
    checksum       text    NOT NULL CHECK (checksum ~ '^sha256:[0-9a-f]{64}$'),
    row_count      bigint  NOT NULL CHECK (row_count >= 0),
    schema_version integer NOT NULL,
    quality        jsonb   NOT NULL CHECK (jsonb_typeof(quality) = 'object'),
    lineage        jsonb   NOT NULL CHECK (jsonb_typeof(lineage) = 'object'),
    state          text    NOT NULL DEFAULT 'registered' CHECK (state IN (
                       'registered', 'waiting', 'published', 'discarded', 'rejected',
                       'dry_run')),
    registered_at  timestamptz NOT NULL DEFAULT herald_now(),
    UNIQUE (job_id, fence)  -- one candidate per attempt
);
CREATE INDEX gen_candidates_partition ON gen_candidates (dataset, partition, state);

CREATE FUNCTION gen_candidate_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- The fence check of the engine's own writes: only the running attempt holding
        -- the job's current fence may register output.
        PERFORM 1 FROM jobs
        WHERE id = NEW.job_id AND fence = NEW.fence AND state = 'running';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'job % fence % does not hold the current fence', NEW.job_id, NEW.fence
                USING ERRCODE = 'lock_not_available';
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.id, NEW.run_id, NEW.dataset, NEW.partition, NEW.job_id, NEW.attempt, NEW.fence,
        NEW.worker, NEW.location, NEW.checksum, NEW.row_count, NEW.schema_version,
        NEW.quality, NEW.lineage, NEW.registered_at)
       IS DISTINCT FROM
       (OLD.id, OLD.run_id, OLD.dataset, OLD.partition, OLD.job_id, OLD.attempt, OLD.fence,
        OLD.worker, OLD.location, OLD.checksum, OLD.row_count, OLD.schema_version,
        OLD.quality, OLD.lineage, OLD.registered_at) THEN
        RAISE EXCEPTION 'a candidate''s output record is immutable; only its state changes'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.state IN ('published', 'discarded', 'rejected', 'dry_run') AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'candidate % is settled (%)', OLD.id, OLD.state
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER gen_candidates_guard BEFORE INSERT OR UPDATE ON gen_candidates
    FOR EACH ROW EXECUTE FUNCTION gen_candidate_guard();
CREATE TRIGGER gen_candidates_kept BEFORE DELETE ON gen_candidates
    FOR EACH ROW EXECUTE FUNCTION gen_immutable();

-- A published generation: immutable; the stable id consumers deduplicate on.
CREATE TABLE gen_publications (
    id                 bigserial PRIMARY KEY,
    publication_id     uuid    NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    dataset            text    NOT NULL REFERENCES gen_datasets(name),
    partition          text    NOT NULL,
    generation         integer NOT NULL CHECK (generation >= 1),
    candidate_id       bigint  NOT NULL UNIQUE REFERENCES gen_candidates(id),
    run_id             bigint  NOT NULL REFERENCES gen_runs(id),
    manifest_ids       bigint[] NOT NULL,
    definition_version text    NOT NULL,
    quality            jsonb   NOT NULL,
    -- 'new': the partition's first generation; 'correction': it replaces one readers saw
    change             text    NOT NULL CHECK (change IN ('new', 'correction')),
    supersedes         uuid,
    published_by       text    NOT NULL,
    published_at       timestamptz NOT NULL DEFAULT herald_now(),
    UNIQUE (dataset, partition, generation),
    CONSTRAINT correction_names_predecessor CHECK (
        (change = 'new') = (generation = 1) AND (change = 'new') = (supersedes IS NULL))
);
CREATE TRIGGER gen_publications_immutable BEFORE UPDATE OR DELETE ON gen_publications
    FOR EACH ROW EXECUTE FUNCTION gen_immutable();

-- The per-partition pointer readers follow; swapped (compare-and-set on generation) in
-- the transaction that writes the publication and its outbox event.
CREATE TABLE gen_current (
    dataset        text    NOT NULL REFERENCES gen_datasets(name),
    partition      text    NOT NULL CHECK (partition <> ''),
    generation     integer NOT NULL DEFAULT 0 CHECK (generation >= 0),
    publication_id bigint  REFERENCES gen_publications(id),
    updated_at     timestamptz NOT NULL DEFAULT herald_now(),
    PRIMARY KEY (dataset, partition),
    CONSTRAINT pointer_iff_generation CHECK ((generation = 0) = (publication_id IS NULL))
);

-- Every choice of the coordinator (and of an operator), with its reason.
CREATE TABLE gen_decisions (
    id                 bigserial PRIMARY KEY,
    dataset            text    NOT NULL,
    partition          text    NOT NULL,
    run_id             bigint  REFERENCES gen_runs(id),
    candidate_id       bigint  REFERENCES gen_candidates(id),
    job_id             bigint,
    fence              bigint,
    decision           text    NOT NULL CHECK (decision IN (
                           'publish', 'wait', 'rebase', 'discard', 'reject', 'refuse',
                           'dry_run', 'quarantine')),
    reason_code        text    NOT NULL CHECK (reason_code ~ '^[a-z_]{1,60}$'),
    reason             text    NOT NULL CHECK (reason <> ''),
    base_generation    integer,
    current_generation integer,
    generation         integer,
    actor              text    NOT NULL DEFAULT 'coordinator',
    decided_at         timestamptz NOT NULL DEFAULT herald_now(),
    CONSTRAINT publish_names_generation CHECK ((decision = 'publish') = (generation IS NOT NULL))
);
CREATE INDEX gen_decisions_partition ON gen_decisions (dataset, partition, id);
CREATE TRIGGER gen_decisions_immutable BEFORE UPDATE OR DELETE ON gen_decisions
    FOR EACH ROW EXECUTE FUNCTION gen_immutable();

-- Durable events, written with the pointer swap; also the consumers' feed (by id).
CREATE TABLE gen_outbox (
    id             bigserial PRIMARY KEY,
    event_id       uuid    NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    publication_id uuid    NOT NULL REFERENCES gen_publications(publication_id),
    dataset        text    NOT NULL,
    event_type     text    NOT NULL CHECK (event_type IN (
                       'generation.published', 'generation.corrected')),
    payload        jsonb   NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at     timestamptz NOT NULL DEFAULT herald_now()
);
CREATE INDEX gen_outbox_dataset ON gen_outbox (dataset, id);
CREATE TRIGGER gen_outbox_immutable BEFORE UPDATE OR DELETE ON gen_outbox
    FOR EACH ROW EXECUTE FUNCTION gen_immutable();

CREATE TABLE gen_subscriptions (
    id          bigserial PRIMARY KEY,
    name        text    NOT NULL UNIQUE CHECK (name <> ''),
    url         text    NOT NULL CHECK (url ~ '^https?://'),
    -- Standard Webhooks secret (whsec_ + base64); never returned by the API
    secret      text    NOT NULL CHECK (secret LIKE 'whsec\_%'),
    datasets    text[]  NOT NULL CHECK (cardinality(datasets) >= 1),
    active      boolean NOT NULL DEFAULT true,
    created_by  text    NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT herald_now()
);

-- One delivery per (subscription, event), sent by a Herald job (its retries, backoff and
-- dead letter); the event id is the idempotency key the receiver deduplicates on.
CREATE TABLE gen_deliveries (
    id              bigserial PRIMARY KEY,
    subscription_id bigint  NOT NULL REFERENCES gen_subscriptions(id),
    outbox_id       bigint  NOT NULL REFERENCES gen_outbox(id),
    state           text    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    UNIQUE (subscription_id, outbox_id),
    CONSTRAINT delivered_iff_time CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);

-- Input that failed validation in a way a retry cannot fix: bounded (per-dataset cap,
-- expiry), redacted, owned; an operator repairs, replays or discards it with a reason.
CREATE TABLE gen_quarantine (
    id              bigserial PRIMARY KEY,
    dataset         text    NOT NULL REFERENCES gen_datasets(name),
    manifest_id     bigint  REFERENCES gen_input_manifests(id),
    run_id          bigint  REFERENCES gen_runs(id),
    partition       text,
    owner           text    NOT NULL CHECK (owner <> ''),
    reason_code     text    NOT NULL CHECK (reason_code IN (
                        'checksum_mismatch', 'schema_mismatch', 'bad_record', 'unreadable')),
    detail          text    NOT NULL,
    sample          jsonb   CHECK (sample IS NULL OR jsonb_typeof(sample) = 'object'),
    redacted_fields text[]  NOT NULL DEFAULT '{}',
    state           text    NOT NULL DEFAULT 'held'
                    CHECK (state IN ('held', 'repaired', 'replayed', 'discarded', 'expired')),
    quarantined_at  timestamptz NOT NULL DEFAULT herald_now(),
    expires_at      timestamptz NOT NULL,
    resolved_by     text,
    resolution      text,
    resolved_at     timestamptz,
    CONSTRAINT expires_after_entry CHECK (expires_at > quarantined_at),
    CONSTRAINT resolved_iff_not_held CHECK (
        (state = 'held') = (resolved_at IS NULL)
        AND (state IN ('held', 'expired') OR (resolved_by IS NOT NULL AND resolution IS NOT NULL)))
);
CREATE INDEX gen_quarantine_held ON gen_quarantine (dataset) WHERE state = 'held';

-- Declared corrective work: source range, definition version, partitions, policy and
-- expected cost stated up front; its tasks run in their own queue, throttled.
CREATE TABLE gen_backfills (
    id                 bigserial PRIMARY KEY,
    dataset            text    NOT NULL REFERENCES gen_datasets(name),
    source_from        timestamptz NOT NULL,
    source_to          timestamptz NOT NULL,
    definition_version text    NOT NULL,
    partitions         text[]  NOT NULL CHECK (cardinality(partitions) >= 1),
    policy             text    NOT NULL CHECK (policy IN ('wait', 'rebase', 'discard')),
    intent             text    NOT NULL CHECK (intent IN ('publish', 'dry_run')),
    expected_cost      jsonb   NOT NULL CHECK (jsonb_typeof(expected_cost) = 'object'),
    writes_per_second  double precision NOT NULL CHECK (writes_per_second > 0),
    concurrency        integer NOT NULL CHECK (concurrency >= 1),
    run_id             bigint  REFERENCES gen_runs(id),
    requested_by       text    NOT NULL,
    reason             text    NOT NULL CHECK (reason <> ''),
    created_at         timestamptz NOT NULL DEFAULT herald_now(),
    CONSTRAINT source_range_ordered CHECK (source_from <= source_to)
);
ALTER TABLE gen_runs ADD CONSTRAINT gen_runs_backfill
    FOREIGN KEY (backfill_id) REFERENCES gen_backfills(id);
