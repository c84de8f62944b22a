"""A password inside OS_AUTH_URL never reaches a log (issue 27, item 12).

keystoneauth's discovery warnings print the auth URL as it is, into Rally's
log: keystone-bench refuses such a URL, in one line, before Rally starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rally_keystone_bench.deploy.mock import MockKeystone

pytestmark = pytest.mark.functional

SECRET = "UrlS3cret"
TASK = Path(__file__).parents[2] / "tasks" / "authenticate-concurrency.yaml"
TINY = {"times": 2, "concurrencies": [1], "tenants": 1, "users_per_tenant": 1}


def test_password_in_os_auth_url_is_refused_and_never_logged(tmp_path):
    with MockKeystone(run_dir=tmp_path / "mock") as ks:
        cred = ks.admin_credentials
        url = cred["auth_url"].replace("://", f"://{cred['username']}:{SECRET}@", 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env.update(
            HOME=str(tmp_path),
            OS_AUTH_URL=url,
            OS_USERNAME=cred["username"],
            OS_PASSWORD=cred["password"],
            OS_PROJECT_NAME=cred["project_name"],
        )
        argv = [sys.executable, "-m", "rally_keystone_bench.cli", "run", "--existing-cloud"]
        argv += [str(TASK), "--task-args", json.dumps(TINY), "--reports-dir", "reports"]
        proc = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "OS_AUTH_URL holds a user or password" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
