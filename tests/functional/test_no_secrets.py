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
from test_scenarios_live import _create_user, _task, _workload, run_task, start_keystone, workloads

from rally_keystone_bench.rallyenv import RallyHome, keystone_spec
from rally_keystone_bench.tokens import TokenClient, UserAuth

pytestmark = pytest.mark.functional

FERNET = re.compile(r"gAAAAA[A-Za-z0-9_-]{50,}")


@pytest.fixture(scope="module")
def keystone(tmp_path_factory):
    ks = start_keystone(tmp_path_factory.mktemp("ks"))
    try:
        yield ks
    finally:
        ks.stop()


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
