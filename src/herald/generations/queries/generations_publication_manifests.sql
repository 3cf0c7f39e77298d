SELECT manifest_ids, publication_id FROM gen_publications WHERE id = %(id)s
