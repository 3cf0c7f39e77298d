-- Every stored ciphertext, for re-encryption under the newest key (key rotation).
SELECT id, provider, base_url, external_id, credentials
FROM social_accounts WHERE credentials IS NOT NULL ORDER BY id
