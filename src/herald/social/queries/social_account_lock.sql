SELECT id, owner, provider, name, external_id, base_url, status, status_reason
FROM social_accounts WHERE id = %(id)s FOR UPDATE
