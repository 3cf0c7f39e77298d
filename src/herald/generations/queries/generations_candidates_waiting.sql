-- Candidates of a partition parked by the coordinator, oldest first.
SELECT * FROM gen_candidates
WHERE dataset = %(dataset)s AND partition = %(partition)s AND state = 'waiting'
ORDER BY id
