-- Social names are a tenant's own (see the core's 0016_tenants): two tenants may each
-- have a user of the same name, link the same remote account, and use the same
-- idempotency key for the same owner. Each unique key now leads with the tenant; a
-- duplicate within one tenant is refused as before. Existing rows already satisfy the
-- narrower keys they replace, so nothing is rewritten.
ALTER TABLE social_users DROP CONSTRAINT social_users_username_key;
ALTER TABLE social_users ADD CONSTRAINT social_users_username_key UNIQUE (tenant_id, username);

DROP INDEX social_accounts_linked_once;
CREATE UNIQUE INDEX social_accounts_linked_once
    ON social_accounts (tenant_id, provider, base_url, external_id) WHERE status <> 'revoked';

ALTER TABLE social_post_keys DROP CONSTRAINT social_post_keys_pkey;
ALTER TABLE social_post_keys ADD CONSTRAINT social_post_keys_pkey PRIMARY KEY (tenant_id, owner, key);
