SELECT * FROM gen_input_manifests WHERE id = %(id)s
