-- Generations for applications that export from a live source (the catalog), and
-- webhook secrets sealed at rest (see docs/generations.md).

-- A run reads either declared input manifests or a live source it names (the catalog
-- exports a database query or a file as it is when the attempt runs): one of the two.
ALTER TABLE gen_runs
    ADD COLUMN live_source jsonb CHECK (live_source IS NULL OR jsonb_typeof(live_source) = 'object');
ALTER TABLE gen_runs DROP CONSTRAINT gen_runs_manifest_ids_check;
ALTER TABLE gen_runs ADD CONSTRAINT inputs_declared
    CHECK (cardinality(manifest_ids) >= 1 OR live_source IS NOT NULL);

-- Webhook secrets are stored encrypted (herald.ops.crypto, 'sealed:' + Fernet token under
-- the HERALD_TOKEN_KEYS rotation scheme); a secret stored as given before this migration
-- ('whsec_...') is still read, and sealed by `herald generations seal-secrets`.
ALTER TABLE gen_subscriptions DROP CONSTRAINT gen_subscriptions_secret_check;
ALTER TABLE gen_subscriptions ADD CONSTRAINT secret_stored
    CHECK (secret LIKE 'sealed:%' OR secret LIKE 'whsec\_%');
