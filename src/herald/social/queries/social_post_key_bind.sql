UPDATE social_post_keys SET post_id = %(post_id)s WHERE owner = %(owner)s AND key = %(key)s
