-- Datasets whose entry predates version links (migrated), a few at a time.
SELECT id FROM datasets WHERE entry_outdated ORDER BY id LIMIT %(limit)s
