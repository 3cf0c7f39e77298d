-- The linked (not revoked) account of a provider with this page or account id.
SELECT id FROM social_accounts
WHERE provider = %(provider)s AND external_id = %(external_id)s AND status <> 'revoked'
ORDER BY id
LIMIT 2
