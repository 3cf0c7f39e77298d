SELECT * FROM gen_datasets WHERE name = %(name)s
