-- When the catalog first published a version (its dct:issued), and the time now.
SELECT min(published_at) AS issued, herald_now() AS now
FROM dataset_versions WHERE published_at IS NOT NULL
