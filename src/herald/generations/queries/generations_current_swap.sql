-- Point readers at the new generation, only from the generation the decision was taken
-- against (the row is locked by generations_current_lock in the same transaction).
UPDATE gen_current SET generation = %(generation)s, publication_id = %(publication_id)s,
                       updated_at = herald_now()
WHERE dataset = %(dataset)s AND partition = %(partition)s AND generation = %(expected)s
RETURNING generation
