SELECT * FROM datasets ORDER BY id LIMIT %(limit)s
