"""The client layer: the only code that speaks HTTP to Keystone."""
