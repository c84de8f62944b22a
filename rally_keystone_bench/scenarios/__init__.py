"""Rally scenario plugins: KeystoneTokens.*"""
