"""No token value and no password in Rally's reports, Rally's logs or Keystone's logs.

A task runs every scenario with `rally --debug` (Rally's most talkative
logging), including a workload that fails on purpose so that error messages
and tracebacks are stored too. Then its JSON and HTML reports, Rally's log
and output, and Keystone's logs are searched for any Fernet token and for
the passwords used.
"""

from __future__ import annotations

import json
import re
import secrets

import pytest
from test_scenarios_live import _create_user, _task, _workload, run_task, workloads

from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.tokens import TokenClient
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

pytestmark = pytest.mark.functional

FERNET = re.compile(r"gAAAAA[A-Za-z0-9_-]{50,}")


@pytest.fixture(scope="module")
def keystone(small_keystone):
    return small_keystone


def test_reports_and_logs_hold_no_token_and_no_password(keystone, tmp_path):
    name = "bench-secret-" + secrets.token_hex(3)
    password = "pw-" + secrets.token_urlsafe(16)
    _create_user(keystone, name, password)
    user = {
        "username": name,
        "password": password,
        "project_name": name,
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    }
    rh = RallyHome(tmp_path / "rally")
    rh.create_env("ks", keystone_spec(keystone.admin_credentials, users=[user]))
    task = _task(
        [
            _workload("KeystoneTokens.authenticate", {}, 3, {}),
            _workload("KeystoneTokens.authenticate", {"method": "token"}, 2, {}),
            _workload("KeystoneTokens.authenticate", {"method": "application_credential"}, 2, {}),
            _workload("KeystoneTokens.validate", {"repetitions": 2}, 3, {}),
            _workload("KeystoneTokens.validate", {"method": "HEAD"}, 2, {}),
            _workload("KeystoneTokens.concurrent_create", {"count": 4, "parallel": 2}, 1, {}),
            _workload("KeystoneTokens.lifecycle", {}, 2, {}),
            # fails on purpose: the user has no role on its domain (HTTP 401)
            _workload("KeystoneTokens.authenticate", {"scope": "domain"}, 2, {}),
        ],
        tmp_path / "task.json",
    )
    code, report, output = run_task(rh, "ks", task, out_dir=tmp_path, debug=True)
    assert code != 0  # the failing workload breaks its SLA

    found = workloads(report)
    assert all(not it["error"] for w in found[:-1] for it in w["data"]), output[-3000:]
    failed = [it["error"] for it in found[-1]["data"]]
    assert failed and all("HTTP 401" in error[1] for error in failed)

    html = tmp_path / "report.html"
    rh.rally("task", "report", report["tasks"][0]["uuid"], "--html-static", "--out", str(html))
    searched = {
        "JSON report": json.dumps(report),
        "HTML report": html.read_text(),
        "rally output": output,
        "rally log": (rh.path / "rally.log").read_text(),
        "keystone log": keystone.keystone_log_path.read_text(),
        "keystone access log": keystone.access_log_path.read_text(),
    }
    assert "HTTP 401" in searched["HTML report"]
    assert "keystone.issue_token" in searched["JSON report"]
    assert len(searched["rally log"]) > 10_000  # --debug: Rally logged plenty

    leaks = []
    for where, text in searched.items():
        leaks += [f"{where}: Fernet token {m[:8]}..." for m in FERNET.findall(text)]
        for label, secret in (("admin password", keystone.admin_password), ("password", password)):
            if secret in text:
                leaks.append(f"{where}: {label}")
    assert not leaks


def test_the_search_would_find_a_token(keystone):
    """The pattern above matches the tokens this Keystone issues."""
    creds = keystone.admin_credentials
    client = TokenClient(creds["auth_url"])
    result = client.issue(UserAuth.from_credential(creds))
    assert FERNET.fullmatch(result.token.value)


# -- a whole `keystone-bench run`: every file it writes, every line it prints ------
# Files whose job is to hold a credential: each must be 0600 in a 0700 directory.
CREDENTIAL_FILES = ("admin-password", "openrc", "rally.sqlite", ".spec.json", "keystone.conf")


def _run_task_file(path, tag: str) -> None:
    task = {
        "version": 2,
        "title": "secrets",
        "subtasks": [
            {
                "title": "issue tokens",
                "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
                "runner": {"constant": {"times": 3, "concurrency": 1}},
                "contexts": {
                    "keystone_tenants": {"tenants": 1},
                    "keystone_users": {"users_per_tenant": 2, "reuse": tag},
                },
                "sla": {"failure_rate": {"max": 0}},
            }
        ],
    }
    path.write_text(json.dumps(task))


def test_a_run_writes_and_prints_no_secret_and_keeps_credentials_private(tmp_path):
    import os
    import stat
    import subprocess
    import sys

    tag = "sec" + secrets.token_hex(3)
    task = tmp_path / "task.json"
    _run_task_file(task, tag)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "rally_keystone_bench.cli", "run", str(task),
         "--password-hash-rounds", "4", "--reports-dir", "reports"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]

    (admin_file,) = tmp_path.glob(".keystone-bench/runs/*/keystone/admin-password")
    admin_password = admin_file.read_text().strip()
    (state,) = (tmp_path / "cache").rglob(f"{tag}-*.json")
    user_passwords = [u["password"] for u in json.loads(state.read_text())["users"].values()]
    assert len(user_passwords) == 2 and admin_password

    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != task]
    assert any(p.suffix == ".html" for p in written) and any(p.name == "rally.log" for p in written)
    leaks, modes = [], []
    for path in written:
        where = str(path.relative_to(tmp_path))
        holds_credential = path == state or path.name.endswith(CREDENTIAL_FILES)
        if holds_credential:
            if stat.S_IMODE(path.stat().st_mode) != 0o600:
                modes.append(f"{where} is {stat.S_IMODE(path.stat().st_mode):o}")
            if stat.S_IMODE(path.parent.stat().st_mode) != 0o700:
                modes.append(
                    f"{where}: its directory is {stat.S_IMODE(path.parent.stat().st_mode):o}"
                )
            continue
        data = path.read_bytes()
        for label, secret in [("admin password", admin_password)] + [
            ("a user's password", p) for p in user_passwords
        ]:
            if secret.encode() in data:
                leaks.append(f"{where}: {label}")
        leaks += [f"{where}: Fernet token" for _ in FERNET.finditer(data.decode("latin-1"))]
    for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        for secret in [admin_password, *user_passwords]:
            if secret in text:
                leaks.append(f"{name}: a password")
        leaks += [f"{name}: Fernet token" for _ in FERNET.finditer(text)]
    assert not leaks
    assert not modes
