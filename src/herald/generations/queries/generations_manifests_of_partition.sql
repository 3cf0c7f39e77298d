SELECT * FROM gen_input_manifests
WHERE dataset = %(dataset)s AND %(partition)s = ANY(partitions) ORDER BY id
