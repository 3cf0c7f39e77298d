-- The partition's pointer, created at generation 0 if new, locked until commit: every
-- decision about one (dataset, partition) is taken one at a time.
INSERT INTO gen_current (dataset, partition) VALUES (%(dataset)s, %(partition)s)
ON CONFLICT (dataset, partition) DO UPDATE SET dataset = EXCLUDED.dataset
RETURNING generation, publication_id
