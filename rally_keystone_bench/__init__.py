"""Rally plugins and tools that benchmark OpenStack Keystone tokens.

Rally imports every module of this package when it loads plugins, so no
module here may do work at import time.
"""
