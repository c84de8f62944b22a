"""Tests that need a Debian package: skip with the install command, or fail in CI.

bindep.txt lists every package; ``.ci/run`` installs them, so in CI (``CI`` set)
a missing one is a broken CI machine and the test fails. Outside CI the test is
skipped and its reason is the exact command that installs what it needs.
"""

from __future__ import annotations

import os
import shutil

import pytest


def install_command(*debian_packages: str) -> str:
    """The command that installs DEBIAN_PACKAGES on Debian or Ubuntu."""
    return "apt-get install " + " ".join(debian_packages)


def require_package(cmd: str, debian_pkg: str, *more: str) -> str:
    """The path of CMD; skip (or fail when ``CI`` is set) naming the install command.

    MORE are further Debian packages the same test needs beside DEBIAN_PKG
    (e.g. ``apache2-dev`` beside ``apache2``).
    """
    found = shutil.which(cmd) or shutil.which(cmd, path="/usr/sbin:/sbin")
    if found:
        return found
    reason = f"{cmd} is not installed ({install_command(debian_pkg, *more)})"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; bindep.txt lists it and .ci/run installs it", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
    raise AssertionError("unreachable")  # pytest.skip raises
