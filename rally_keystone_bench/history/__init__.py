"""The results store: every run recorded, read back as series (doc/source/history.rst)."""
