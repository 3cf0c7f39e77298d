-- Open-data catalog: registered datasets, their numbered versions, and the files each
-- version exported. A version's row is the state the status endpoint shows; the files
-- are what the export store holds for it.

CREATE TABLE datasets (
    id             text        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' AND id !~ '\.\.'),
    title          text        NOT NULL CHECK (length(title) <= 1000),
    description    text        NOT NULL CHECK (length(description) <= 100000),
    publisher_name text        NOT NULL CHECK (publisher_name <> '' AND length(publisher_name) <= 1000),
    publisher_uri  text        NOT NULL CHECK (publisher_uri ~ '^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>"{}|\\^`]+$'),
    license_uri    text        CHECK (license_uri ~ '^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>"{}|\\^`]+$'),
    keywords       text[]      NOT NULL DEFAULT '{}' CHECK (array_position(keywords, NULL) IS NULL),
    -- [{"uri": ..., "label": ...}, ...]
    themes         jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(themes) = 'array'),
    -- {"name": ..., "email": ..., "url": ...}
    contact_point  jsonb       CHECK (jsonb_typeof(contact_point) = 'object'),
    languages      text[]      NOT NULL DEFAULT '{}' CHECK (array_position(languages, NULL) IS NULL),
    -- further DCAT-AP details: publisher/licence types, spatial, temporal, landing page.
    details        jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(details) = 'object'),
    -- where the records come from: {"type": "postgres_query" | "postgres_table" | "csv"
    -- | "jsonl" | "generated", ...}; checked in depth when the source is opened.
    source         jsonb       NOT NULL CHECK (
        jsonb_typeof(source) = 'object'
        AND source ->> 'type' IN ('postgres_query', 'postgres_table', 'csv', 'jsonl', 'generated')
    ),
    tier           text        NOT NULL DEFAULT 'basic' CHECK (tier IN ('basic', 'high')),
    schedule_id    bigint      REFERENCES schedules (id) ON DELETE SET NULL,
    -- the number the next publication takes: versions are never reused.
    next_version   integer     NOT NULL DEFAULT 1 CHECK (next_version >= 1),
    created_at     timestamptz NOT NULL DEFAULT herald_now(),
    updated_at     timestamptz NOT NULL DEFAULT herald_now()
);

CREATE TABLE dataset_versions (
    dataset_id    text        NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    version       integer     NOT NULL CHECK (version >= 1),
    -- the publication job (no foreign key: finished jobs are pruned, versions stay).
    job_id        bigint,
    state         text        NOT NULL DEFAULT 'requested' CHECK (
        state IN ('requested', 'exporting', 'exported', 'published', 'failed', 'deleting', 'deleted')
    ),
    record_count  bigint      CHECK (record_count >= 0),
    validation    jsonb       CHECK (jsonb_typeof(validation) = 'object'),
    metadata      text,       -- the entry's DCAT-AP, as Turtle
    error         text,
    created_at    timestamptz NOT NULL DEFAULT herald_now(),
    updated_at    timestamptz NOT NULL DEFAULT herald_now(),
    published_at  timestamptz,
    deleted_at    timestamptz,
    PRIMARY KEY (dataset_id, version),
    CONSTRAINT published_has_metadata CHECK (
        state <> 'published' OR (published_at IS NOT NULL AND metadata IS NOT NULL)
    ),
    CONSTRAINT deleted_has_time CHECK (state <> 'deleted' OR deleted_at IS NOT NULL),
    CONSTRAINT failed_has_error CHECK (state <> 'failed' OR error IS NOT NULL)
);
-- One publication in flight per dataset: a second trigger finds the active one.
CREATE UNIQUE INDEX dataset_versions_one_active ON dataset_versions (dataset_id)
    WHERE state IN ('requested', 'exporting', 'exported');
CREATE INDEX dataset_versions_job ON dataset_versions (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE dataset_files (
    dataset_id   text        NOT NULL,
    version      integer     NOT NULL,
    format       text        NOT NULL CHECK (format IN ('json', 'xml', 'csv')),
    store_key    text        NOT NULL UNIQUE CHECK (store_key <> ''),
    name         text        NOT NULL CHECK (name <> ''),
    media_type   text        NOT NULL CHECK (media_type <> ''),
    byte_size    bigint      NOT NULL CHECK (byte_size >= 0),
    record_count bigint      NOT NULL CHECK (record_count >= 0),
    sha256       text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    created_at   timestamptz NOT NULL DEFAULT herald_now(),
    PRIMARY KEY (dataset_id, version, format),
    FOREIGN KEY (dataset_id, version) REFERENCES dataset_versions (dataset_id, version)
        ON DELETE CASCADE
);
