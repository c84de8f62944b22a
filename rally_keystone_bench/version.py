"""The tool's own version, as installed: setuptools-scm derives it from git tags."""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "rally-keystone-bench"


def version() -> str:
    """The installed distribution's version (``0.1.devN+gHASH`` before the first tag)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
