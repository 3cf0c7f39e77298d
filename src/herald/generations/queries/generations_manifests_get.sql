SELECT * FROM gen_input_manifests WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id
