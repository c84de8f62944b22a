"""Local Keystone deployments (and the mock token service) as processes."""
