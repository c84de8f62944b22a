"""The oldest Keystone release that installs on this Python starts and issues a token.

Built with the dependencies published before its release day (see
deploy/releases.py); slow: a Keystone environment of its own, once.
"""

from __future__ import annotations

import os

import pytest

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy import venv
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone

pytestmark = [pytest.mark.functional, pytest.mark.slow]

# The oldest that works on Python 3.11 (22.x and older: no Yappi that builds).
OLDEST = os.environ.get("KEYSTONE_BENCH_OLDEST", "keystone==23.0.0")


def test_the_oldest_release_that_works_starts_and_issues_a_token(tmp_path):
    ks = LocalKeystone(Deployment(keystone=OLDEST, workers=1, password_hash_rounds=4), tmp_path)
    ks.start()
    try:
        assert venv.keystone_version(venv.env_path(OLDEST)) == OLDEST.split("==")[1]
        admin = AdminClient(ks.admin_credentials)
        # the admin's own project-scoped token, issued with its password
        project = admin.admin_project_domain_id()
        assert project == "default"
        status, body = admin.request("GET", "/auth/projects", "list the admin's projects")
        assert status == 200 and body["projects"]
        # the oslo.db of its day (23.x: 12.x, 24.x: 14.x), not today's
        oslo_db = venv_version(OLDEST, "oslo.db")
        assert int(oslo_db.split(".")[0]) < 15, f"oslo.db {oslo_db}: not of the release's day"
    finally:
        ks.stop()


def venv_version(spec: str, dist: str) -> str:
    import subprocess

    python = venv.env_path(spec) / "bin" / "python"
    probe = f"import importlib.metadata as m; print(m.version({dist!r}))"
    return subprocess.run([str(python), "-c", probe], capture_output=True, text=True).stdout.strip()
