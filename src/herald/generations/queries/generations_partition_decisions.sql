SELECT * FROM gen_decisions WHERE dataset = %(dataset)s AND partition = %(partition)s
ORDER BY id DESC LIMIT %(limit)s
