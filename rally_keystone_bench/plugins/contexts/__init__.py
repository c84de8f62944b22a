"""Rally context plugins: keystone_tenants, keystone_users, token_pool."""
