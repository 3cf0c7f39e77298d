-- The catalog's versions become generations (docs/catalog.md, "Versions as generations").
-- The catalog is one generations dataset, 'catalog'; each catalog dataset is one of its
-- partitions (the partition is the dataset id); a version is a run of that partition, and
-- a published version is a generation, its publication and the partition's pointer.

INSERT INTO gen_datasets (name, owner, schema_version, fields)
VALUES ('catalog', 'catalog', 1, ARRAY['files'])
ON CONFLICT (name) DO NOTHING;

-- A version's run (planned when its publication starts) and, once published, its
-- generation.
ALTER TABLE dataset_versions
    ADD COLUMN run_id     bigint  REFERENCES gen_runs (id),
    ADD COLUMN generation integer CHECK (generation >= 1);

-- Existing published versions migrate as the generations they were: per dataset, in
-- version order, a settled run, its candidate (the version's files, registered by the
-- migration: the fence guard is set aside for these rows only), the publication, the
-- decision and the pointer. No outbox event is written: no consumer was subscribed.
ALTER TABLE gen_candidates DISABLE TRIGGER gen_candidates_guard;
DO $$
DECLARE
    v           record;
    new_run     bigint;
    new_cand    bigint;
    pub         record;
    previous    uuid;
    gen         integer := 0;
    last_ds     text := NULL;
BEGIN
    FOR v IN
        SELECT dv.*, d.source,
               (SELECT 'sha256:' || encode(sha256(convert_to(string_agg(
                           f.format || ' ' || f.sha256 || ' ' || f.name || E'\n', ''
                           ORDER BY f.format), 'UTF8')), 'hex')
                FROM dataset_files f
                WHERE f.dataset_id = dv.dataset_id AND f.version = dv.version) AS digest,
               (SELECT coalesce(jsonb_agg(jsonb_build_object(
                           'format', f.format, 'name', f.name, 'key', f.store_key,
                           'sha256', f.sha256, 'byte_size', f.byte_size) ORDER BY f.format),
                        '[]')
                FROM dataset_files f
                WHERE f.dataset_id = dv.dataset_id AND f.version = dv.version) AS files
        FROM dataset_versions dv JOIN datasets d ON d.id = dv.dataset_id
        WHERE dv.state = 'published'
        ORDER BY dv.dataset_id, dv.version
    LOOP
        IF last_ds IS DISTINCT FROM v.dataset_id THEN
            gen := 0;
            previous := NULL;
            last_ds := v.dataset_id;
        END IF;
        gen := gen + 1;
        INSERT INTO gen_runs (dataset, purpose, definition_version, manifest_ids, live_source,
                              partitions, intent, policy, base_generations, state,
                              requested_by, reason, created_at, settled_at)
        VALUES ('catalog', 'scheduled', 'catalog-export', '{}',
                jsonb_build_object('type', v.source ->> 'type'), ARRAY[v.dataset_id],
                'publish', 'discard', jsonb_build_object(v.dataset_id, gen - 1), 'settled',
                'migration', 'catalog version ' || v.version || ' published before generations',
                v.created_at, v.published_at)
        RETURNING id INTO new_run;
        -- A version whose job id was never kept gets a negative stand-in (unique per run).
        INSERT INTO gen_candidates (run_id, dataset, partition, job_id, attempt, fence, worker,
                                    location, checksum, row_count, schema_version, quality,
                                    lineage, state, registered_at)
        VALUES (new_run, 'catalog', v.dataset_id, coalesce(v.job_id, -new_run), 1, 1,
                'migration', v.dataset_id || '/v' || v.version,
                coalesce(v.digest, 'sha256:' || encode(sha256(''::bytea), 'hex')),
                coalesce(v.record_count, 0), 1,
                jsonb_build_object('dcat_ap', jsonb_build_object(
                    'passed', true, 'detail', 'validated when version ' || v.version
                                              || ' was published')),
                jsonb_build_object('run', new_run, 'version', v.version, 'job', v.job_id,
                                   'files', v.files, 'migrated', true),
                'published', v.published_at)
        RETURNING id INTO new_cand;
        INSERT INTO gen_publications (dataset, partition, generation, candidate_id, run_id,
                                      manifest_ids, definition_version, quality, change,
                                      supersedes, published_by, published_at)
        VALUES ('catalog', v.dataset_id, gen, new_cand, new_run, '{}', 'catalog-export',
                jsonb_build_object('dcat_ap', jsonb_build_object('passed', true)),
                CASE WHEN gen = 1 THEN 'new' ELSE 'correction' END, previous, 'migration',
                v.published_at)
        RETURNING id, publication_id INTO pub;
        INSERT INTO gen_run_partitions (run_id, partition, job_id, state, candidate_id,
                                        detail, updated_at)
        VALUES (new_run, v.dataset_id, v.job_id, 'published', new_cand,
                'publish: migrated catalog version ' || v.version, v.published_at);
        INSERT INTO gen_decisions (dataset, partition, run_id, candidate_id, job_id, fence,
                                   decision, reason_code, reason, base_generation,
                                   current_generation, generation, actor, decided_at)
        VALUES ('catalog', v.dataset_id, new_run, new_cand, v.job_id, 1, 'publish', 'migrated',
                'catalog version ' || v.version || ' was published before versions became '
                || 'generations', gen - 1, gen - 1, gen, 'migration', v.published_at);
        INSERT INTO gen_current (dataset, partition, generation, publication_id, updated_at)
        VALUES ('catalog', v.dataset_id, gen, pub.id, v.published_at)
        ON CONFLICT (dataset, partition) DO UPDATE
            SET generation = EXCLUDED.generation, publication_id = EXCLUDED.publication_id,
                updated_at = EXCLUDED.updated_at;
        UPDATE dataset_versions SET run_id = new_run, generation = gen
        WHERE dataset_id = v.dataset_id AND version = v.version;
        previous := pub.publication_id;
    END LOOP;
END $$;
ALTER TABLE gen_candidates ENABLE TRIGGER gen_candidates_guard;


-- Entries written before versions were linked are described again, with their version
-- links and lineage, by the catalog.reconcile duty (herald.catalog.entries).
ALTER TABLE datasets ADD COLUMN entry_outdated boolean NOT NULL DEFAULT false;
UPDATE datasets d SET entry_outdated = true
WHERE EXISTS (SELECT 1 FROM dataset_versions v WHERE v.dataset_id = d.id AND v.state = 'published');
