SELECT * FROM datasets WHERE id = %(id)s
