SELECT * FROM gen_quarantine
WHERE dataset = %(dataset)s
  AND (%(partition)s::text IS NULL OR partition = %(partition)s OR partition IS NULL)
  AND (%(state)s::text IS NULL OR state = %(state)s)
ORDER BY id DESC LIMIT %(limit)s
